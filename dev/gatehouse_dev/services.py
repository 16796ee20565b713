"""Gatehouse itself on the local machine: operator, proxy replicas and an example upstream.

Each runs as its own process, exactly as in a Pod (``python -m gatehouse_operator`` and
``python -m gatehouse_proxy``), against the cluster it is given, on free loopback ports, with its
log in the work folder. Tests, ``make up`` and the demo start them through :class:`LocalGatehouse`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import kopf
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gatehouse_contract.keyring import Keyring
from gatehouse_dev import nginx, stack_rbac
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.controlplane import WEBHOOK_CLIENT_NAME
from gatehouse_dev.processes import Server, free_port
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.waiting import wait_for
from gatehouse_operator.api import crds, roles
from gatehouse_operator.controllers import webhook_configuration as webhooks
from gatehouse_operator.keys.sealed_values import SEALING_KEYS_FILE, SealingKeys

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
# The release the local stack stands for: the operator runs as that release's ServiceAccount,
# bound to the chart's own rendered ClusterRole, never as the API server's admin, so a verb the
# chart forgets fails here as it would in every installation.
RELEASE = NAMESPACE = stack_rbac.RELEASE
# The roles of the dev STS's account the local stack lets every namespace sign as.
DEV_AWS_ROLES = "arn:aws:iam::111122223333:role/gatehouse-dev-*"
# The chart's name for its webhook configuration (gatehouse.webhookConfiguration), the one name
# its ClusterRole lets the operator patch.
WEBHOOK_CONFIGURATION = f"{RELEASE}-{NAMESPACE}"


@dataclass
class Endpoint:
    server: Server
    url: str
    # The proxy's readiness and metrics listener (its own port, as in a Pod): /readyz, /metrics.
    admin_url: str = ""
    # The dev upstream's mTLS listener, when it has one (start_upstream's tls).
    tls_url: str = ""


def _answers(url: str) -> bool:
    try:
        # Only whether it answers: the operator's channel certificate is the keyring's, which
        # the proxies pin (see channel_tls).
        return httpx.get(url, timeout=1, verify=False).status_code == 200  # noqa: S501
    except httpx.HTTPError:
        return False


@dataclass
class LocalGatehouse:
    cluster: Cluster
    workdir: Path
    detached: bool = False
    table_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    operator_metrics_port: int = field(default_factory=free_port)
    # The first proxy replica's port, known before it starts (the env file names it).
    proxy_port: int = field(default_factory=free_port)
    servers: list[Server] = field(default_factory=list)
    # The shared store the proxies start with, once start_store has run.
    store: RedisServer | None = None

    @property
    def keyring_file(self) -> Path:
        return self.workdir / "keyring.json"

    @property
    def operator_url(self) -> str:
        return f"https://127.0.0.1:{self.table_port}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def operator_metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.operator_metrics_port}"

    def install_crds(self) -> None:
        """The CRDs and the user-facing ClusterRoles, as the chart installs them."""
        for manifests in (CRDS, roles.output_file(ROOT)):
            self.cluster.kubectl(
                "apply", "--server-side", "--force-conflicts", "-f", str(manifests)
            )
        names = [f"crd/{kind.crd_name}" for kind in crds.KINDS]
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=30s", *names)

    def write_keyring(self, keyring: Keyring | None = None) -> Keyring:
        keyring = keyring or Keyring.generate("k1")
        self.workdir.mkdir(parents=True, exist_ok=True)
        partial = self.keyring_file.with_suffix(".partial")
        partial.write_text(keyring.dump())
        partial.chmod(0o600)
        partial.replace(self.keyring_file)  # atomic, like a Secret volume's symlink swap
        return keyring

    @property
    def sealing_keys_file(self) -> Path:
        # Beside the keyring file, where the operator reads them when it has no Secret for them.
        return self.keyring_file.with_name(SEALING_KEYS_FILE)

    def write_sealing_keys(self, keys: SealingKeys | None = None) -> SealingKeys:
        keys = keys or SealingKeys.generate()
        self.workdir.mkdir(parents=True, exist_ok=True)
        partial = self.sealing_keys_file.with_suffix(".partial")
        partial.write_text(keys.dump())
        partial.chmod(0o600)
        partial.replace(self.sealing_keys_file)
        return keys

    def _start(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        url: str,
        ready_path: str,
        ready: str = "",
    ) -> Endpoint:
        """Starts a server and waits until ``ready`` (default ``url``) answers at ``ready_path``."""
        server = Server(name, argv, self.workdir / "logs" / f"{name}.log")
        server.start(detached=self.detached, env={**self.cluster.env(), **env})
        self.servers.append(server)
        server.wait_until(lambda: _answers((ready or url) + ready_path), timeout=60)
        return Endpoint(server, url)

    def start_store(self) -> RedisServer:
        """The fleet's shared store (Debian's redis-server), as the chart bundles one: proxies
        started after this use it."""
        self.store = RedisServer(self.workdir / "store")
        self.store.start(detached=self.detached)
        assert self.store.server is not None
        self.servers.append(self.store.server)
        return self.store

    def start_upstream(self, port: int = 0, tls: Mapping[str, Path] | None = None) -> Endpoint:
        """The dev upstream (gatehouse_dev.upstream); with ``tls`` (its cert, key and client_ca
        files) also over mTLS on a port of its own, at the endpoint's ``tls_url``."""
        port = port or free_port()
        argv = [sys.executable, "-m", "gatehouse_dev.upstream", "--port", str(port)]
        tls_port = free_port() if tls else 0
        if tls:
            argv += [f"--tls-port={tls_port}", f"--tls-cert={tls['cert']}"]
            argv += [f"--tls-key={tls['key']}", f"--client-ca={tls['client_ca']}"]
        endpoint = self._start(
            f"upstream-{port}", argv, {}, f"http://127.0.0.1:{port}", "/echo/ready"
        )
        endpoint.tls_url = f"https://127.0.0.1:{tls_port}" if tls else ""
        return endpoint

    def start_token_endpoint(
        self, public_key: rsa.RSAPublicKey | None = None, client_email: str = ""
    ) -> Endpoint:
        """The dev authorization server; with a service account's public key, Google's JWT
        grant too (client credentials' clients are registered at run time)."""
        port = free_port()
        argv = [sys.executable, "-m", "gatehouse_dev.token_endpoint", f"--port={port}"]
        if public_key is not None:
            key_path = self.workdir / f"token-endpoint-{port}.pem"
            key_path.write_bytes(
                public_key.public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
            )
            argv += [f"--public-key={key_path}", f"--client-email={client_email}"]
        return self._start(f"token-endpoint-{port}", argv, {}, f"http://127.0.0.1:{port}", "/stats")

    def start_aws_sts(self, jwks: str, issuer: str) -> Endpoint:
        """AWS STS as a web identity meets it (gatehouse_dev.aws_sts), trusting the OIDC
        provider whose key set is ``jwks`` (the API server's own) and ``issuer``."""
        port = free_port()
        jwks_path = self.workdir / f"aws-sts-{port}-jwks.json"
        jwks_path.write_text(jwks)
        argv = [
            sys.executable,
            "-m",
            "gatehouse_dev.aws_sts",
            f"--port={port}",
            f"--jwks={jwks_path}",
            f"--issuer={issuer}",
        ]
        return self._start(f"aws-sts-{port}", argv, {}, f"http://127.0.0.1:{port}", "/stats")

    def start_viewer_issuer(self) -> Endpoint:
        """The dev viewer-assertion issuer (gatehouse_dev.viewer_issuer): its URL is its
        ``iss``, its keys at ``/jwks``."""
        port = free_port()
        argv = [sys.executable, "-m", "gatehouse_dev.viewer_issuer", f"--port={port}"]
        return self._start(f"viewer-issuer-{port}", argv, {}, f"http://127.0.0.1:{port}", "/stats")

    def start_floor(self, upstream_url: str, module: str = "floor_passthrough") -> Endpoint:
        """The benchmark's floor (see gatehouse_dev.floor_passthrough), on the proxy's server,
        loop and HTTP parser; ``module``: another of gatehouse_dev's floors (floor_raw_client,
        the prototype with another upstream client)."""
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            "uvicorn",
            f"gatehouse_dev.{module}:app",
            "--host=127.0.0.1",
            f"--port={port}",
            "--log-level=warning",
            "--loop=uvloop",
            "--http=httptools",
            "--no-access-log",
            "--no-server-header",
            "--no-proxy-headers",
        ]
        env = {"GATEHOUSE_FLOOR_UPSTREAM": upstream_url}
        return self._start(f"floor-{port}", argv, env, f"http://127.0.0.1:{port}", "/")

    def start_nginx(self, name: str, config: Callable[[Path, int], str]) -> Endpoint:
        """nginx, its ``config`` made for its folder and port (see gatehouse_dev.nginx)."""
        binary = nginx.binary()
        if binary is None:
            raise RuntimeError("nginx is not installed (Debian: apt-get install nginx-light)")
        port = free_port()
        folder = self.workdir / name
        argv = nginx.argv(binary, folder, config(folder, port))
        return self._start(name, argv, {}, f"http://127.0.0.1:{port}", "/")

    def operator_env(self) -> dict[str, str]:
        return {
            "GATEHOUSE_KEYRING_FILE": str(self.keyring_file),
            "GATEHOUSE_TABLE_HOST": "127.0.0.1",
            "GATEHOUSE_TABLE_PORT": str(self.table_port),
            "GATEHOUSE_ALLOW_HTTP_UPSTREAMS": "true",
            "GATEHOUSE_API_HOST": "127.0.0.1",
            "GATEHOUSE_API_PORT": str(self.api_port),
            # What `gatehouse open` opens, told in each SignInRequest's answer.
            "GATEHOUSE_PAGE_URL": self.api_url,
            "GATEHOUSE_METRICS_HOST": "127.0.0.1",
            "GATEHOUSE_METRICS_PORT": str(self.operator_metrics_port),
            # A proxy process on this machine that stops is gone (no network partitions here):
            # stop counting it soon.
            "GATEHOUSE_REPLICA_GRACE_SECONDS": "5",
            # Elected, as in the chart: a second operator started beside it stands by.
            "GATEHOUSE_LEADER_LEASE": f"{NAMESPACE}/{RELEASE}-operator",
            "GATEHOUSE_SEALING_KEYS_CONFIGMAP": f"{NAMESPACE}/{RELEASE}-sealing-keys",
            # One tenant on this machine: every namespace may sign as the dev STS's roles
            # (gatehouse_dev.aws_sts), and as no other.
            "GATEHOUSE_AWS_ROLES": json.dumps({"*": [DEV_AWS_ROLES]}),
        }

    def install_webhooks(self) -> None:
        """The webhook configuration, as the chart installs it, sent to this machine's webhook.

        The webhook fills in the CA bundle when it starts; until then (failure policy Fail) the
        changes the webhooks check are refused.
        """
        where = kopf.WebhookClientConfig(url=f"https://127.0.0.1:{self.webhook_port}")
        configuration = webhooks.configuration(WEBHOOK_CONFIGURATION, where)
        self.cluster.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            stdin=json.dumps(configuration),
        )

    def service_account_kubeconfig(self, component: str) -> Path:
        """A kubeconfig of the release's ``component`` ServiceAccount (operator, webhook), with
        the chart's rendered RBAC for it applied (and, for the operator, the sealing keys'
        ConfigMap it fills in, and the admission policy that holds its Secret writes to its
        own): exactly the rights an installation gives."""
        rendered = stack_rbac.rendered(component)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(namespace))
        self.cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", stdin=rendered)
        token = self.cluster.kubectl(
            "create", "token", f"{RELEASE}-{component}", "-n", NAMESPACE, "--duration=48h"
        ).stdout.strip()
        return self.cluster.token_kubeconfig(
            component, token, self.workdir / f"{component}.kubeconfig"
        )

    def start_webhook(self) -> Endpoint:
        """The admission webhook process, as its own ServiceAccount; ready once the webhook
        configuration holds its certificate's CA (until then the API server cannot call it)."""
        self.install_webhooks()
        liveness = free_port()
        argv = [
            sys.executable,
            "-m",
            "gatehouse_operator",
            "--role=webhook",
            f"--liveness=http://127.0.0.1:{liveness}/healthz",
        ]
        env = {
            "GATEHOUSE_WEBHOOK_HOST": "127.0.0.1",
            "GATEHOUSE_WEBHOOK_PORT": str(self.webhook_port),
            "GATEHOUSE_WEBHOOK_CONFIGURATION": WEBHOOK_CONFIGURATION,
            "KUBECONFIG": str(self.service_account_kubeconfig("webhook")),
        }
        if self.cluster.webhook_client_ca is not None:
            # As a hardened installation runs it: answering the API server's certificate alone.
            env["GATEHOUSE_WEBHOOK_CLIENT_CA_FILE"] = str(self.cluster.webhook_client_ca)
            env["GATEHOUSE_WEBHOOK_CLIENT_NAMES"] = WEBHOOK_CLIENT_NAME
        endpoint = self._start("webhook", argv, env, f"http://127.0.0.1:{liveness}", "/healthz")
        wait_for(self._webhook_ca_installed, timeout=30, what="the webhook's CA bundle")
        return endpoint

    def _webhook_ca_installed(self) -> bool:
        found = self.cluster.kubectl(
            "get", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION, "-o", "json"
        ).stdout
        return all(hook["clientConfig"].get("caBundle") for hook in json.loads(found)["webhooks"])

    def start_operator(self, *, standby: bool = False) -> Endpoint:
        """The operator (the controller) as its ServiceAccount, and the admission webhook beside
        it unless one runs already. ``standby``: one more replica, which waits for the Lease
        (ready once its probe answers; it serves nothing else until it leads)."""
        if "webhook" not in {server.name for server in self.servers}:
            self.start_webhook()
        liveness = f"http://127.0.0.1:{free_port()}"
        argv = [sys.executable, "-m", "gatehouse_operator", f"--liveness={liveness}/healthz"]
        kubeconfig = self.service_account_kubeconfig("operator")
        env = {**self.operator_env(), "KUBECONFIG": str(kubeconfig)}
        if standby:
            name = f"operator-standby-{len(self.servers)}"
            return self._start(name, argv, env, self.operator_url, "/healthz", ready=liveness)
        return self._start("operator", argv, env, self.operator_url, "/healthz")

    def start_page_server(
        self, *, read_only: bool, settings: dict[str, str] | None = None
    ) -> Endpoint:
        """The service API and connections page alone (see page_server), beside the operator;
        ``settings``: more of the operator's environment (an OIDC issuer's)."""
        port = free_port()
        argv = [sys.executable, "-m", "gatehouse_dev.page_server", f"--port={port}"]
        if read_only:
            argv.append("--read-only")
        url = f"http://127.0.0.1:{port}"
        env = {
            "GATEHOUSE_KEYRING_FILE": str(self.keyring_file),
            "GATEHOUSE_PAGE_URL": url,
            **(settings or {}),
        }
        return self._start(f"page-{port}", argv, env, url, "/healthz")

    def start_oidc_issuer(self, client_id: str, client_secret: str) -> Endpoint:
        """The dev OpenID Connect issuer (see oidc_issuer) on a free loopback port."""
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            "gatehouse_dev.oidc_issuer",
            f"--port={port}",
            f"--client-id={client_id}",
            f"--client-secret={client_secret}",
        ]
        return self._start(f"oidc-{port}", argv, {}, f"http://127.0.0.1:{port}", "/healthz")

    def start_proxy(
        self,
        *,
        token_url: str = "",
        operator_url: str = "",
        read_timeout_seconds: float = 0,
        workers: int = 1,
        event_loop: str = "auto",
        store: RedisServer | bool | None = True,
        allowed_private_networks: str = "127.0.0.0/8,::1/128",
        settings: dict[str, str] | None = None,
        source: Path | None = None,
        module: str = "gatehouse_proxy",
    ) -> Endpoint:
        """A proxy replica; ``store``: the stack's shared store (True), none (False), or
        another; ``settings``: more of its environment (GATEHOUSE_...); ``source``: a tree
        whose ``proxy/`` and ``contract/`` it runs instead of the installed ones (an earlier
        commit's, for before/after figures); ``module``: what runs it (gatehouse_dev's
        proxy_with_table: with a table of the caller's, no operator's)."""
        started = {server.name for server in self.servers}
        port = self.proxy_port if f"proxy-{self.proxy_port}" not in started else free_port()
        metrics_port = free_port()
        env = {
            "GATEHOUSE_KEYRING_FILE": str(self.keyring_file),
            "GATEHOUSE_OPERATOR_URL": operator_url or self.operator_url,
            "GATEHOUSE_ALLOW_HTTP_UPSTREAMS": "true",
            "GATEHOUSE_ALLOWED_PRIVATE_NETWORKS": allowed_private_networks,
            # Where a viewer's connect link points: the operator's page.
            "GATEHOUSE_PAGE_URL": self.api_url,
        }
        if token_url:
            env["GATEHOUSE_GOOGLE_TOKEN_URL"] = token_url
        env.update(settings or {})
        shared = self.store if store is True else store or None
        if shared is not None:
            env["GATEHOUSE_STORE_URL"] = shared.url
            env["GATEHOUSE_STORE_PASSWORD"] = shared.password
        if read_timeout_seconds:
            env["GATEHOUSE_REQUEST_READ_TIMEOUT_SECONDS"] = str(read_timeout_seconds)
        if source is not None:
            # Ahead of the installed (editable) packages on the import path.
            env["PYTHONPATH"] = os.pathsep.join(
                str(source / part) for part in ("proxy", "contract")
            )
        argv = [
            sys.executable,
            "-m",
            module,
            "--host=127.0.0.1",
            f"--port={port}",
            f"--metrics-port={metrics_port}",
            "--log-level=warning",
        ]
        # Only when asked, so the same line starts an earlier proxy (for before/after figures).
        argv += [f"--workers={workers}"] if workers != 1 else []
        argv += [f"--event-loop={event_loop}"] if event_loop != "auto" else []
        endpoint = self._start(f"proxy-{port}", argv, env, f"http://127.0.0.1:{port}", "/healthz")
        endpoint.admin_url = f"http://127.0.0.1:{metrics_port}"
        return endpoint

    def stop(self) -> None:
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()
        if not self.cluster.local:
            remove_webhooks(self.cluster)


def remove_webhooks(cluster: Cluster) -> None:
    """Deletes the webhook configuration the dev stack installed.

    It stays while an operator is merely down (failure policy Fail), but one that ran on this
    machine will not come back: left behind in a user's cluster, it would block every DataApp
    and ChartType change there.
    """
    cluster.kubectl(
        "delete",
        "validatingwebhookconfiguration",
        WEBHOOK_CONFIGURATION,
        "--ignore-not-found",
        check=False,
    )
