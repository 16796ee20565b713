"""``awsSigV4``: each request signed with AWS Signature Version 4 (``credentials.aws_signing``)
for the connection's region and service, with its stored keys (decrypted for the one request), or
a role's keys by web identity (``credentials.aws_roles``: asked of STS once for the fleet and
renewed before they expire, as every minted credential is). The request is signed last, as it
will be sent (the path and query as forwarded, the Host header sent, the body's hash or
``UNSIGNED-PAYLOAD``).

Signed: Host, X-Amz-Date, X-Amz-Content-Sha256, X-Amz-Security-Token (temporary keys), and of
the request's own headers Content-Type, Content-MD5 and every ``X-Amz-*`` one (an app's
X-Amz-Target, S3's x-amz-meta-*). The app's own Authorization and signing headers are dropped:
they are the kind's. Sent, and so scrubbed: the session token, and each request's signature (an
upstream that echoes Authorization back). The secret access key is never sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from yarl import URL

from gatehouse_contract import sent_forms
from gatehouse_contract.aws_keys import AwsKeys, AwsKeysError
from gatehouse_contract.header_names import canonical_name
from gatehouse_contract.routes import AWS_SIGNING_HEADERS, ConnectionRoute, Credential
from gatehouse_proxy.credentials import injecting
from gatehouse_proxy.credentials.aws_signing import (
    UNSIGNED_PAYLOAD,
    Scope,
    SigningRequest,
    payload_hash,
    sign,
)
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey
from gatehouse_proxy.credentials.injecting import Injection, Kind, Sending, Sources, decrypt
from gatehouse_proxy.errors import ProxyError

SIGNING_HEADERS = AWS_SIGNING_HEADERS
# The request's own headers a signature covers, besides every x-amz-* one.
_SIGNED = frozenset({"content-type", "content-md5"})
# A body larger than this is hashed off the event loop (hashlib lets go of the GIL for it):
# SHA-256 takes about 60 µs per 64 KiB on one core, a megabyte about a millisecond.
_HASHED_INLINE_BYTES = 64 * 1024


def _signed(name: str) -> bool:
    name = canonical_name(name)
    return name in _SIGNED or name.startswith("x-amz-")


async def _payload_hash(body: Sequence[bytes]) -> str:
    if sum(len(piece) for piece in body) > _HASHED_INLINE_BYTES:
        return await asyncio.to_thread(payload_hash, body)
    return payload_hash(body)


@dataclass
class _Signing:
    """One injection's signer: its keys and scope, and the injection its signatures are
    scrubbed from."""

    keys: AwsKeys
    scope: Scope
    unsigned: bool
    injection: Injection

    async def sign(self, sending: Sending) -> list[tuple[str, str]]:
        url = URL(sending.url, encoded=True)
        # As aiohttp writes Host (the host, the port unless the scheme's, an IPv6 address in
        # brackets); given, it is sent as it is, so the Host signed is the Host sent.
        host = url.host_port_subcomponent or ""
        request = SigningRequest(
            sending.method,
            host,
            url.raw_path,
            url.raw_query_string,
            [(name, value) for name, value in sending.headers if _signed(name)],
            UNSIGNED_PAYLOAD if self.unsigned else await _payload_hash(sending.body),
        )
        signed = sign(request, self.keys, self.scope, datetime.now(UTC))
        self.injection.secrets = (*self.injection.secrets, signed.signature)
        return [("Host", host), *signed.headers]


def _keys(text: str) -> AwsKeys:
    try:
        return AwsKeys.parse(text)
    except AwsKeysError:
        raise ProxyError(
            "connection_unavailable", "the connection's AWS keys cannot be read"
        ) from None


class AwsSigV4(Kind):
    """``awsSigV4``: stored keys (``AwsKeys``: as ``aws configure export-credentials`` writes
    them), or a role's by web identity: those are minted (``mints``: the fleet keeps them, and
    drops them with their route)."""

    mints: ClassVar[bool] = True

    def __init__(self, sources: Sources) -> None:
        super().__init__(sources)
        self.tokens = sources.tokens
        self.roles = sources.roles

    @staticmethod
    def header_names(credential: Credential) -> frozenset[str]:
        return SIGNING_HEADERS

    @staticmethod
    def credential_key(connection: ConnectionRoute) -> CredentialKey:
        """A role's keys are another role's, duration's or region's (its STS); the session is
        the connection's (its key is in every credential key)."""
        aws = connection.credential.aws
        if aws is None or aws.web_identity is None:
            return injecting.credential_key(connection)
        role = aws.web_identity
        return injecting.credential_key(
            connection, role.role_arn, str(role.duration_seconds), aws.region
        )

    async def inject(
        self, connection: ConnectionRoute, *, shared: bool, refused: str, viewer: str
    ) -> Injection:
        credential = connection.credential
        aws = credential.aws
        if aws is None:
            raise ProxyError("connection_unavailable", "the connection names no AWS region")
        role = aws.web_identity
        if role is None:
            secret = decrypt(self.keyring, connection).decode()
            keys = _keys(secret)
            injection = Injection(secrets=sent_forms.secret_sent(credential, secret).forms)
        else:
            key = self.credential_key(connection)
            # A second past STS's own deadline, so that its reason is the one given.
            seconds = connection.limits.timeout_seconds
            minted = await self.tokens.token(
                key,
                lambda: self.roles.mint(connection.key, aws, role, seconds),
                shared=shared,
                within=seconds + 1,
                refused=refused,
            )
            keys = _keys(minted)
            # The keys as kept first (the token a refusal names), then each form sent or held.
            forms = (minted, *sent_forms.aws_session_token(keys.session_token).forms)
            injection = Injection(secrets=(*forms, keys.secret_access_key), minted=key)
        injection.signer = _Signing(
            keys, Scope.for_service(aws.region, aws.service), aws.payload == "unsigned", injection
        )
        return injection

    def forget(self, keep: set[CredentialKey]) -> None:
        """The fleet's tokens are forgotten once for every kind (Injector.forget)."""

    def discard(self, connection: ConnectionRoute) -> None:
        self.tokens.discard(self.credential_key(connection))
