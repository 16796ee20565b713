"""Temporary AWS keys for a role, asked of STS with the proxy's own AWS identity.

Two identities, as AWS's SDKs look for them: a web identity (IRSA), where
``AssumeRoleWithWebIdentity`` takes the Pod's projected service account token (the file the
``AWS_WEB_IDENTITY_TOKEN_FILE`` setting names, which the kubelet rotates); else EKS Pod Identity,
where the Pod's own role's keys (:mod:`gatehouse_proxy.credentials.aws_pod_identity`) sign an
``AssumeRole`` of the connection's role (role chaining: AWS holds such keys to an hour, so a
longer ``durationSeconds`` is asked as 3,600). Either way STS answers the role's keys, which are
minted once for the fleet and renewed before they expire as every minted credential is
(:mod:`gatehouse_proxy.credentials.fleet_tokens`): the token kept is the keys' JSON
(:meth:`gatehouse_contract.aws_keys.AwsKeys.stored`), encrypted in the store. Where STS is asked
is the installation's (``GATEHOUSE_AWS_STS_URL``, the region's own endpoint by default), never a
connection's: what is sent there is the proxy's identity, not a tenant's.

STS answers XML; an answer is read within the token requests' bounds (size, time), and one that
declares a document type is refused where the parser meets it, in any encoding (no entity is
ever declared, let alone expanded).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit
from xml.etree import ElementTree

from yarl import URL

from gatehouse_contract import sent_forms
from gatehouse_contract.aws_keys import AwsKeys, AwsKeysError
from gatehouse_contract.redaction import Redactor
from gatehouse_contract.routes import AWS_REGION, AwsSigning, WebIdentity, role_session_name
from gatehouse_proxy.credentials.aws_pod_identity import PodIdentity, agent_url, token_in_file
from gatehouse_proxy.credentials.aws_signing import Scope, SigningRequest, payload_hash, sign
from gatehouse_proxy.credentials.token_grants import (
    MAX_LIFETIME_SECONDS,
    GrantRequest,
    MintedToken,
    TokenClient,
    explained,
)
from gatehouse_proxy.errors import ProxyError

# The region's own endpoint: the global one (us-east-1) is slower and AWS advises against it.
DEFAULT_STS_URL = "https://sts.{region}.amazonaws.com/"
STS_VERSION = "2011-06-15"
# STS grants at least 15 minutes: keys that expire sooner than this (a signed request may arrive
# after they do) say the proxy's clock is wrong. The fleet renews them a quarter of their life
# (at most a minute) before they expire.
LEAST_LIFETIME_SECONDS = 5.0
# AWS's limit for a role's keys asked with another role's (role chaining).
CHAINED_MAX_SECONDS = 3600
FORM_TYPE = "application/x-www-form-urlencoded"
# The region STS signs for is its endpoint's: sts.<region>.amazonaws.com(.cn), sts-fips.<region>,
# an interface endpoint's <id>.sts.<region>.vpce.amazonaws.com; the global one's is us-east-1.
GLOBAL_STS_HOST = "sts.amazonaws.com"
_STS_HOST = re.compile(
    r"(?:[a-z0-9-]+\.)*sts(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.(?:vpce\.)?amazonaws\.com(?:\.cn)?"
)
# How STS's AccessDenied names the caller: with Pod Identity, the proxies' own role and Pod,
# which are the installation's, not a tenant's to read.
_ASSUMED_ROLE = re.compile(r"arn:aws[a-z-]*:sts::\d{12}:assumed-role/\S+")


@dataclass(frozen=True)
class AwsSettings:
    """The installation's AWS settings: where STS is asked (``{region}`` is the connection's),
    the file the Pod's web identity token is in (None: the proxy has none), and EKS Pod
    Identity's agent and the file of its token (None: not associated)."""

    sts_url: str = DEFAULT_STS_URL
    web_identity_token_file: Path | None = None
    pod_identity_url: str | None = None
    pod_identity_token_file: Path | None = None

    @classmethod
    def from_env(cls) -> AwsSettings:
        sts_url = os.environ.get("GATEHOUSE_AWS_STS_URL", DEFAULT_STS_URL)
        try:
            scheme = urlsplit(sts_url.format(region="us-east-1")).scheme
        except (KeyError, IndexError, ValueError):
            scheme = ""
        if scheme not in ("https", "http"):
            raise ValueError(
                "GATEHOUSE_AWS_STS_URL must be an https:// URL, where {region} may stand for "
                f"the connection's region, not {sts_url!r}"
            )
        token_file = os.environ.get("AWS_WEB_IDENTITY_TOKEN_FILE")
        agent = os.environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        agent_token = os.environ.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        return cls(
            sts_url,
            Path(token_file) if token_file else None,
            agent_url(agent) if agent else None,
            Path(agent_token) if agent_token else None,
        )

    def pod_identity(self) -> PodIdentity | None:
        """EKS Pod Identity's agent, when the Pod has one."""
        if self.pod_identity_url is None:
            return None
        return PodIdentity(self.pod_identity_url, self.pod_identity_token_file)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


class _NoDocumentType(ElementTree.TreeBuilder):
    """Refuses a document type where the parser meets it, in whatever encoding the document
    declares (UTF-16's "<!DOCTYPE" is no byte pattern of UTF-8's): before any entity is
    declared, let alone expanded."""

    def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
        raise ValueError("a document type")


def _fields(body: bytes) -> dict[str, str]:
    """Each leaf element's text by its local name (STS's answers name each field once)."""
    parser = ElementTree.XMLParser(target=_NoDocumentType())  # noqa: S314 (bounded, no DTD)
    parser.feed(body)
    root = parser.close()
    return {_local(element.tag): (element.text or "").strip() for element in root.iter()}


def _sts_error(body: bytes, redact: Redactor, describe: bool) -> tuple[str, str]:
    """STS's error answer (``ErrorResponse/Error/Code`` and ``Message``), as OAuth's is said."""
    try:
        fields = _fields(body)
    except (ValueError, ElementTree.ParseError):
        return "", ""
    return explained(fields.get("Code"), fields.get("Message") if describe else None, redact)


def _chained_sts_error(body: bytes, redact: Redactor, describe: bool) -> tuple[str, str]:
    """STS's error to an AssumeRole, the proxies' own role's session left out."""
    code, said = _sts_error(body, redact, describe)
    return code, _ASSUMED_ROLE.sub("the proxies' role", said)


def signing_region(host: str, region: str) -> str:
    """The region a request to STS at ``host`` is signed for; ``region`` (the connection's)
    where the host names none."""
    if host == GLOBAL_STS_HOST:
        return "us-east-1"
    found = _STS_HOST.fullmatch(host)
    return found.group(1) if found else region


def keys_of(body: bytes, now: float) -> MintedToken:
    """The keys in STS's answer (``AssumeRoleWithWebIdentity``'s or ``AssumeRole``'s), and how
    long they live from ``now``; a ProxyError naming what is wrong (never a value)."""
    try:
        fields = _fields(body)
    except (ValueError, ElementTree.ParseError):
        raise ProxyError("credential_failed", "AWS STS's answer is not XML it can read") from None
    try:
        keys = AwsKeys(
            fields.get("AccessKeyId", ""),
            fields.get("SecretAccessKey", ""),
            fields.get("SessionToken", ""),
        )
        # Held to what a stored key is held to: what the fleet keeps and signs with.
        AwsKeys.parse(keys.stored())
    except AwsKeysError as error:
        raise ProxyError("credential_failed", f"AWS STS's credentials: {error}") from None
    if not keys.session_token:
        raise ProxyError("credential_failed", "AWS STS's credentials have no SessionToken")
    try:
        expiration = datetime.fromisoformat(fields["Expiration"])
    except (KeyError, ValueError):
        raise ProxyError(
            "credential_failed", "AWS STS's credentials have no Expiration it can read"
        ) from None
    if expiration.tzinfo is None:
        expiration = expiration.replace(tzinfo=UTC)  # STS writes UTC
    lifetime = expiration.timestamp() - now
    if lifetime < LEAST_LIFETIME_SECONDS:
        raise ProxyError(
            "credential_failed",
            f"AWS STS's credentials expire in {lifetime:.0f}s: too soon to use (check the "
            "proxy's clock)",
        )
    # STS grants at most 12 hours; a later Expiration is held to what any minted token may live.
    return MintedToken(keys.stored(), min(lifetime, MAX_LIFETIME_SECONDS))


class RoleMinter:
    """Asks STS for a role's keys with the proxy's web identity token, else with its EKS Pod
    Identity."""

    def __init__(
        self,
        client: TokenClient,
        token_file: Path | None,
        sts_url: str = DEFAULT_STS_URL,
        timeout: float = 10.0,
        pod: PodIdentity | None = None,
    ) -> None:
        self.client = client
        self.token_file = token_file
        self.sts_url = sts_url
        self.timeout = timeout
        self.pod = pod

    async def mint(
        self, connection_key: str, aws: AwsSigning, role: WebIdentity, seconds: float
    ) -> MintedToken:
        """The role's keys for the connection ``connection_key`` (its session's name)."""
        if not AWS_REGION.fullmatch(aws.region):
            # The URL's {region} is the connection's: nothing but a region may make its host.
            raise ProxyError(
                "credential_failed",
                "the connection's region is not an AWS region's name (us-east-1, "
                "eu-west-1...): a role's keys are asked of that region's STS",
            )
        within = min(self.timeout, seconds)
        form = {
            "Version": STS_VERSION,
            "RoleArn": role.role_arn,
            "RoleSessionName": role_session_name(connection_key),
        }
        if self.token_file is None and self.pod is not None:
            return await self._chained(self.pod, aws.region, form, role.duration_seconds, within)
        identity = await self._identity_token()
        body = await self.client.posted(
            GrantRequest(
                self.sts_url.format(region=aws.region),
                form={
                    "Action": "AssumeRoleWithWebIdentity",
                    **form,
                    "DurationSeconds": str(role.duration_seconds),
                    "WebIdentityToken": identity,
                },
                headers={},
                seconds=within,
                code="credential_failed",
                redact=Redactor(sent_forms.form_field(identity).forms),
                read_error=_sts_error,
            )
        )
        return keys_of(body, time.time())

    async def _chained(
        self,
        identity: PodIdentity,
        region: str,
        form: dict[str, str],
        duration: int,
        seconds: float,
    ) -> MintedToken:
        """``AssumeRole`` signed with the Pod's own role's keys (EKS Pod Identity)."""
        started = time.monotonic()
        pod = await identity.keys(seconds)
        url = self.sts_url.format(region=region)
        form = {
            "Action": "AssumeRole",
            **form,
            "DurationSeconds": str(min(duration, CHAINED_MAX_SECONDS)),
        }
        target = URL(url)
        # As aiohttp writes Host, and the body as the token client posts it: signed as sent.
        host = target.host_port_subcomponent or ""
        signed = sign(
            SigningRequest(
                "POST",
                host,
                target.raw_path or "/",
                target.raw_query_string,
                [("Content-Type", FORM_TYPE)],
                payload_hash([sent_forms.form_body(form)]),
            ),
            pod,
            Scope(signing_region(target.host or "", region), "sts"),
            datetime.now(UTC),
        )
        said = (*sent_forms.aws_session_token(pod.session_token).forms, signed.signature)
        try:
            body = await self.client.posted(
                GrantRequest(
                    url,
                    form=form,
                    headers={"Host": host, **dict(signed.headers)},
                    seconds=max(0.0, seconds - (time.monotonic() - started)),
                    code="credential_failed",
                    redact=Redactor(said),
                    read_error=_chained_sts_error,
                )
            )
        except ProxyError:
            # Keys STS no longer takes (expired early, revoked) are not used again: the next
            # mint asks the agent, whatever STS's reason was.
            identity.forget()
            raise
        return keys_of(body, time.time())

    async def _identity_token(self) -> str:
        """The Pod's token as the kubelet last wrote it (read again at each mint: it rotates)."""
        if self.token_file is None:
            raise ProxyError(
                "credential_failed",
                "this proxy has no AWS identity: neither a web identity token "
                "(AWS_WEB_IDENTITY_TOKEN_FILE: the chart's installation.aws.webIdentity.enabled) "
                "nor EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI: its service account "
                "associated with a role)",
            )
        return await token_in_file(self.token_file, "the proxy's web identity")
