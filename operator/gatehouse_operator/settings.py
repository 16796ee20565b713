"""Installation settings of the operator, from the environment (the Helm chart sets them)."""

from __future__ import annotations

import json
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gatehouse_contract.env import env_flag, env_port, env_seconds


def _ca_file(name: str) -> Path | None:
    """A PEM file of CA certificates named by the variable ``name``, checked to load: a wrong
    path or a file without a certificate stops the process at start, with this message, rather
    than refuse every caller later."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        loaded = ssl.create_default_context(cafile=raw).cert_store_stats()["x509_ca"]
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"{name}: cannot read CA certificates from {raw} ({error})") from None
    if not loaded:
        raise ValueError(f"{name}: {raw} holds no CA certificate (PEM, CA:TRUE)")
    return Path(raw)


def _object_ref(name: str) -> str:
    raw = os.environ.get(name, "").strip()
    namespace, _, name_ = raw.partition("/")
    if raw and not (namespace and name_ and "/" not in name_):
        raise ValueError(f"{name} must be namespace/name, not {raw!r}")
    return raw


@dataclass(frozen=True)
class OidcSettings:
    """The page's "Sign in with ...": the OpenID Connect issuer the API server trusts, the page's
    client there, and the claims mapped as kube-apiserver's --oidc-* flags map them. No issuer:
    no such button."""

    issuer: str = ""
    client_id: str = ""
    client_secret: str = ""
    # The button's words: "Sign in with <name>".
    name: str = ""
    username_claim: str = "sub"
    # None: the API server's default (the issuer and "#" unless the claim is email); "-": none.
    username_prefix: str | None = None
    groups_claim: str = ""
    groups_prefix: str = ""

    @classmethod
    def from_env(cls) -> OidcSettings:
        issuer = os.environ.get("GATEHOUSE_OIDC_ISSUER", "").strip()
        found = cls(
            issuer=issuer,
            client_id=os.environ.get("GATEHOUSE_OIDC_CLIENT_ID", "").strip(),
            client_secret=os.environ.get("GATEHOUSE_OIDC_CLIENT_SECRET", "").strip(),
            name=os.environ.get("GATEHOUSE_OIDC_NAME", "").strip() or issuer,
            username_claim=os.environ.get("GATEHOUSE_OIDC_USERNAME_CLAIM", "").strip() or "sub",
            username_prefix=os.environ.get("GATEHOUSE_OIDC_USERNAME_PREFIX"),
            groups_claim=os.environ.get("GATEHOUSE_OIDC_GROUPS_CLAIM", "").strip(),
            groups_prefix=os.environ.get("GATEHOUSE_OIDC_GROUPS_PREFIX", ""),
        )
        if issuer and not found.client_id:
            raise ValueError("GATEHOUSE_OIDC_ISSUER is set: set GATEHOUSE_OIDC_CLIENT_ID too")
        return found


# What an AWS role's ARN is written with (as the connection's auth.awsSigV4.webIdentity.roleArn).
_ROLE_ARN = re.compile(r"arn:[\x21-\x7e]+")


@dataclass(frozen=True)
class AwsRoles:
    """The AWS roles each namespace's connections may sign as with the proxies' web identity
    (the chart's installation.aws.webIdentity.roles): every project's connections share the
    proxies' identity, so AWS cannot tell them apart and the installation must. A role is listed
    exactly, or by a prefix ending in ``*``; those listed under ``*`` are every namespace's (an
    installation with one tenant)."""

    by_namespace: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def allows(self, namespace: str, role_arn: str) -> bool:
        listed = (*self.by_namespace.get(namespace, ()), *self.by_namespace.get("*", ()))
        return any(
            role_arn.startswith(role[:-1]) if role.endswith("*") else role_arn == role
            for role in listed
        )

    @classmethod
    def from_env(cls) -> AwsRoles:
        raw = os.environ.get("GATEHOUSE_AWS_ROLES", "").strip() or "{}"
        rule = (
            "GATEHOUSE_AWS_ROLES must be a JSON object of namespaces, each with a list of role "
            "ARNs (arn:..., or a prefix ending in *)"
        )
        try:
            given = json.loads(raw)
        except ValueError:
            raise ValueError(f"{rule}; it is not JSON") from None
        if not isinstance(given, dict) or not all(
            isinstance(roles, list)
            and all(isinstance(role, str) and _ROLE_ARN.fullmatch(role) for role in roles)
            for roles in given.values()
        ):
            raise ValueError(rule)
        return cls({namespace: tuple(roles) for namespace, roles in given.items()})


@dataclass(frozen=True)
class OperatorSettings:
    # The keyring: a file (a mounted Secret; the dev stack), or a Secret the operator reads
    # through the API and makes when absent and allowed (the chart: see keyring_secret).
    keyring_file: Path | None = None
    keyring_secret: str = ""
    keyring_create: bool = False
    table_host: str = "0.0.0.0"  # noqa: S104 (a server in a Pod; the proxies connect to it)
    table_port: int = 8081
    allow_http: bool = False
    # Prometheus metrics (plain HTTP, a port of their own); 0: none.
    metrics_host: str = "0.0.0.0"  # noqa: S104 (a server in a Pod)
    metrics_port: int = 0
    # How long a proxy replica whose stream broke still counts as serving its last table (so
    # changes it lacks are reported PendingProxies); a replica shutting down says goodbye.
    replica_grace_seconds: float = 30.0
    # The service API (TokenReview + SubjectAccessReview in front of every endpoint).
    api_host: str = "0.0.0.0"  # noqa: S104 (a server in a Pod)
    api_port: int = 8082
    # The connections page (on the service API's port) without its writes, for clusters whose
    # connections and apps are applied from Git: list, detail, tests and samples stay, and the
    # wizard drafts YAML without saving.
    web_read_only: bool = False
    # The page's URL as browsers reach it, told to `gatehouse open` in each SignInRequest's
    # status; empty: the command must be given it.
    page_url: str = ""
    oidc: OidcSettings = field(default_factory=OidcSettings)
    # How long a fresh operator waits to see every existing resource before it publishes a table,
    # so that proxies never receive a partial one after a restart.
    initial_sync_seconds: float = 30.0
    # The Lease ("namespace/name") the controller replicas elect their leader with; empty: this
    # process leads alone, unelected (one replica).
    leader_lease: str = ""
    # The namespaces watched (--namespace, the chart's operator.watchNamespaces); empty: all.
    namespaces: tuple[str, ...] = ()
    # The sealing keys: a Secret ("namespace/name") the operator reads through the API and
    # makes when absent and allowed (the chart: see sealing_secret); empty: a file beside the
    # keyring file (the dev stack), if there is one.
    sealing_keys_secret: str = ""
    sealing_keys_create: bool = False
    # The ConfigMap ("namespace/name") the sealing keys' public halves are published in, for
    # anyone to seal with (gatehouse seal); empty: not published.
    sealing_keys_config_map: str = ""
    # The Secret ("namespace/name") holding the password of the chart's bundled store, made
    # when absent (see store_secret); empty: no bundled store, nothing to make.
    store_secret: str = ""
    # The AWS roles each namespace may sign as with the proxies' web identity.
    aws_roles: AwsRoles = field(default_factory=AwsRoles)

    @classmethod
    def from_env(cls) -> OperatorSettings:
        keyring_file = os.environ.get("GATEHOUSE_KEYRING_FILE", "").strip()
        keyring_secret = _object_ref("GATEHOUSE_KEYRING_SECRET")
        if bool(keyring_file) == bool(keyring_secret):
            raise ValueError(
                "set exactly one of GATEHOUSE_KEYRING_FILE and GATEHOUSE_KEYRING_SECRET"
            )
        return cls(
            keyring_file=Path(keyring_file) if keyring_file else None,
            keyring_secret=keyring_secret,
            keyring_create=env_flag("GATEHOUSE_KEYRING_CREATE"),
            table_host=os.environ.get("GATEHOUSE_TABLE_HOST", cls.table_host),
            table_port=env_port("GATEHOUSE_TABLE_PORT", cls.table_port),
            allow_http=env_flag("GATEHOUSE_ALLOW_HTTP_UPSTREAMS"),
            metrics_host=os.environ.get("GATEHOUSE_METRICS_HOST", cls.metrics_host),
            metrics_port=env_port("GATEHOUSE_METRICS_PORT", cls.metrics_port),
            replica_grace_seconds=env_seconds(
                "GATEHOUSE_REPLICA_GRACE_SECONDS", cls.replica_grace_seconds
            ),
            api_host=os.environ.get("GATEHOUSE_API_HOST", cls.api_host),
            api_port=env_port("GATEHOUSE_API_PORT", cls.api_port),
            web_read_only=env_flag("GATEHOUSE_WEB_READ_ONLY"),
            page_url=os.environ.get("GATEHOUSE_PAGE_URL", "").strip().rstrip("/"),
            oidc=OidcSettings.from_env(),
            leader_lease=_object_ref("GATEHOUSE_LEADER_LEASE"),
            sealing_keys_secret=_object_ref("GATEHOUSE_SEALING_KEYS_SECRET"),
            sealing_keys_create=env_flag("GATEHOUSE_SEALING_KEYS_CREATE"),
            sealing_keys_config_map=_object_ref("GATEHOUSE_SEALING_KEYS_CONFIGMAP"),
            store_secret=_object_ref("GATEHOUSE_STORE_SECRET"),
            aws_roles=AwsRoles.from_env(),
        )


@dataclass(frozen=True)
class WebhookSettings:
    """The admission webhook process's (``--role=webhook``): it needs no keyring."""

    # Where it listens, and how the API server reaches it: through a Service ("namespace/name")
    # in a cluster, or at the listening address on a developer's machine.
    host: str = "0.0.0.0"  # noqa: S104 (a server in a Pod)
    port: int = 9443
    service: str = ""
    # The ValidatingWebhookConfiguration the installer made, whose CA bundle the webhook fills in.
    # The configuration's name where no installer names it (the chart names its own).
    configuration: str = "gatehouse.dev"
    # The Secret ("namespace/name") that every replica serves the same certificate from; the
    # first replica to find it missing makes it. Empty: a certificate of this process's own
    # (one replica, the dev stack).
    tls_secret: str = ""
    # Client authentication (mutual TLS): a PEM file of the CAs that sign the API server's
    # client certificate (its AdmissionConfiguration names the certificate). Set, a caller
    # without a certificate they signed fails the TLS handshake. None, and no client_secret:
    # the webhook answers whoever reaches its port (see docs/security/who-may-do-what.md).
    client_ca_file: Path | None = None
    # Or the Secret ("namespace/name") of the CA and the API server's client certificate that
    # the webhook makes itself when absent (see access.webhook_clients): the chart's default.
    client_secret: str = ""
    # With either: the subject common names a client certificate may carry (e.g.
    # kube-apiserver); others are answered 403 before any check runs. Empty: any it signed.
    client_names: tuple[str, ...] = ()

    @classmethod
    def from_env(cls) -> WebhookSettings:
        client_ca_file = _ca_file("GATEHOUSE_WEBHOOK_CLIENT_CA_FILE")
        client_secret = _object_ref("GATEHOUSE_WEBHOOK_CLIENT_SECRET")
        client_names = tuple(
            name.strip()
            for name in os.environ.get("GATEHOUSE_WEBHOOK_CLIENT_NAMES", "").split(",")
            if name.strip()
        )
        if client_ca_file is not None and client_secret:
            raise ValueError(
                "GATEHOUSE_WEBHOOK_CLIENT_CA_FILE and GATEHOUSE_WEBHOOK_CLIENT_SECRET: give one "
                "source of the CA that signs the API server's client certificate"
            )
        if client_names and client_ca_file is None and not client_secret:
            raise ValueError(
                "GATEHOUSE_WEBHOOK_CLIENT_NAMES needs GATEHOUSE_WEBHOOK_CLIENT_CA_FILE or "
                "GATEHOUSE_WEBHOOK_CLIENT_SECRET: names are checked on certificates that CA signed"
            )
        return cls(
            host=os.environ.get("GATEHOUSE_WEBHOOK_HOST", cls.host),
            port=env_port("GATEHOUSE_WEBHOOK_PORT", cls.port),
            service=os.environ.get("GATEHOUSE_WEBHOOK_SERVICE", cls.service),
            configuration=os.environ.get("GATEHOUSE_WEBHOOK_CONFIGURATION", cls.configuration),
            tls_secret=_object_ref("GATEHOUSE_WEBHOOK_TLS_SECRET"),
            client_ca_file=client_ca_file,
            client_secret=client_secret,
            client_names=client_names,
        )
