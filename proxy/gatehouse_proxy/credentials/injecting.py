"""What an auth kind's injector is: the protocol every kind implements, the sources it is made
with, and the :class:`Injection` it gives the request.

As Envoy's credential injectors (generic, OAuth 2.0), each kind is one class behind one protocol:
the names it sends the credential under (known before decrypting, so that the app's own headers
are checked against them first), whether it mints tokens (and the key its token is kept under for
the fleet), how it injects, and every form of the secret it sends (``Injection.secrets``, written
by :mod:`gatehouse_contract.sent_forms`: the scrubber catches what was sent). The kinds are listed
once, in :mod:`gatehouse_proxy.credentials.kinds`; the request path calls
:mod:`gatehouse_proxy.credentials.injectors`, which dispatches to them.

The encrypted credential is decrypted here (:func:`decrypt`), for the one request being made,
and the plain value lives only in the returned :class:`Injection` until the request is sent.

A kind that signs the request rather than sending a value (AWS Signature Version 4) gives the
injection a :class:`Signer`: the request path calls it last, with the request as it will be sent
(:class:`Sending`), so that the signature covers what the upstream receives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from gatehouse_contract.keyring import Encrypted, KeyringError, KeyringFile
from gatehouse_contract.routes import ConnectionRoute, Credential, UpstreamTls
from gatehouse_proxy.credentials.fleet_grants import FleetGrants
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey, FleetTokens
from gatehouse_proxy.credentials.google_tokens import GoogleMinter
from gatehouse_proxy.credentials.token_grants import TokenClient
from gatehouse_proxy.errors import ProxyError

AUTHORIZATION = frozenset({"Authorization"})
NO_HEADERS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Sending:
    """A request as it will be sent, the credential's headers in: what a :class:`Signer` signs."""

    method: str
    url: str  # as sent: encoded, the injected query in
    # As sent, but for what aiohttp adds: Host (unless given), Content-Length, User-Agent.
    headers: Sequence[tuple[str, str]]
    body: Sequence[bytes]  # the pieces it is sent in


class Signer(Protocol):
    async def sign(self, sending: Sending) -> list[tuple[str, str]]:
        """The headers that sign ``sending``, added to it as they are (Host among them, where
        the signature covers it: the value sent is the one signed). Each request's signature
        is added to the injection's secrets: an upstream that echoes it back is scrubbed."""
        ...


@dataclass
class Injection:
    headers: dict[str, str] = field(default_factory=dict)
    query: tuple[str, str] | None = None
    # Every form the injected value is sent in (sent_forms), the value as read first: nothing the
    # upstream echoes back may carry one.
    secrets: tuple[str, ...] = ()
    # A minted token's credential: a 401 is judged, and one retry may get another token.
    minted: CredentialKey | None = None
    # A signing kind's: called last, with the request as it will be sent.
    signer: Signer | None = None

    @property
    def token(self) -> str:
        return self.secrets[0] if self.secrets else ""


@dataclass(frozen=True)
class Sources:
    """What the injectors are made with, once per worker: the keyring the credentials are
    decrypted with, the fleet's minted tokens, the token endpoints' clients, and the fleet's
    grants (the owners' own tokens, authorization code)."""

    keyring: KeyringFile
    tokens: FleetTokens
    google: GoogleMinter
    token_client: TokenClient
    grants: FleetGrants


class CredentialInjector(Protocol):
    """One auth kind's injector, made once per worker from the :class:`Sources`."""

    # Whether its tokens are minted: kept once for the fleet, a 401 to one judged
    # (gatehouse_proxy.credentials.token_refusals), and the request sent once more with another.
    mints: ClassVar[bool]
    # Whether it sends a credential at all: the app's own credential headers are dropped then.
    sends: ClassVar[bool]

    def __init__(self, sources: Sources) -> None: ...

    @staticmethod
    def header_names(credential: Credential) -> frozenset[str]:
        """The names :meth:`inject` sends the credential under, known before it is decrypted
        or minted: the headers the upstream gets are settled (and checked) before then."""
        ...

    @staticmethod
    def query_parameter(credential: Credential) -> str | None:
        """The query parameter :meth:`inject` sends the credential in, if it goes in the query:
        the body's rules keep an app from sending that name itself."""
        ...

    @staticmethod
    def credential_key(connection: ConnectionRoute) -> CredentialKey:
        """What its token is kept under: a changed secret, scope or token request is another
        token, so that a token never outlives what it was issued for."""
        ...

    async def inject(
        self, connection: ConnectionRoute, *, shared: bool, refused: str, viewer: str
    ) -> Injection:
        """The credential as the upstream gets it, with every form it is sent in.
        ``shared=False``: a minted token stays with this worker (a draft's test). ``refused``: a
        minted token the upstream refused this request: another is injected. ``viewer``: the
        verified viewer the request is made for (their grants' owner), "" when none was asked
        for (a connection that does not need one, or a connection test)."""
        ...

    def forget(self, keep: set[CredentialKey]) -> None:
        """The routing table now routes the minted credentials ``keep``: what the kind holds of
        others (beyond the fleet's tokens) is dropped."""
        ...

    def discard(self, connection: ConnectionRoute) -> None:
        """Drops what is held for one connection at once (a draft's, after its test)."""
        ...


def decrypt(keyring: KeyringFile, connection: ConnectionRoute) -> bytes:
    """The connection's credential in the clear, for the one request being made."""
    credential = connection.credential
    if credential.encrypted is None:
        raise ProxyError("connection_unavailable", "the connection has no credential")
    return _decrypted(
        keyring,
        credential.encrypted,
        credential.context(connection.uid, connection.origin),
        "the connection's credential cannot be decrypted here",
    )


def decrypt_client_certificate(keyring: KeyringFile, connection: ConnectionRoute) -> bytes:
    """The connection's client certificate (its PEM chain, then its private key) in the clear,
    for its TLS context to be made with (gatehouse_proxy.upstream.connection_tls)."""
    tls = connection.tls
    if tls is None or tls.client_certificate is None:
        raise ProxyError("connection_unavailable", "the connection has no client certificate")
    return _decrypted(
        keyring,
        tls.client_certificate,
        UpstreamTls.context(connection.uid, connection.origin),
        "the connection's client certificate cannot be decrypted here",
    )


def _decrypted(keyring: KeyringFile, encrypted: Encrypted, context: str, refusal: str) -> bytes:
    try:
        current = keyring.current()
        if encrypted.key_id not in current.key_ids:
            # Encrypted with a key added since the keyring was last looked at.
            current = keyring.current(fresh=True)
        return current.decrypt(encrypted, context)
    except KeyringError:
        raise ProxyError("connection_unavailable", refusal) from None


def credential_key(connection: ConnectionRoute, *depends_on: str) -> CredentialKey:
    """A token's key: the credential's kind, its encrypted value's fingerprint (a new secret is
    re-encrypted), its scopes, and whatever else the kind's token ``depends_on``."""
    return CredentialKey.of(connection.key, connection.uid, key_parts(connection, *depends_on))


def key_parts(connection: ConnectionRoute, *depends_on: str) -> list[str]:
    """What :func:`credential_key` is made of (for a kind that adds to it per request)."""
    credential = connection.credential
    return [credential.type, credential.fingerprint, *sorted(credential.scopes), *depends_on]


class Kind:
    """What every kind starts from: the keyring its secret is decrypted with, a credential sent in
    ``Authorization`` (none in the query), and a token key of the secret and its scopes."""

    sends: ClassVar[bool] = True

    def __init__(self, sources: Sources) -> None:
        self.keyring = sources.keyring

    @staticmethod
    def header_names(credential: Credential) -> frozenset[str]:
        return AUTHORIZATION

    @staticmethod
    def query_parameter(credential: Credential) -> str | None:
        return None

    @staticmethod
    def credential_key(connection: ConnectionRoute) -> CredentialKey:
        return credential_key(connection)
