"""Credential injectors: what each auth type adds to an upstream request.

The encrypted credential is decrypted here, for the one request being made, and the plain value
lives only in the returned :class:`Injection` until the request is sent. Minted tokens (OAuth 2.0
client credentials, Google service accounts) come from the fleet's one token per credential
(:mod:`gatehouse_proxy.credentials.fleet_tokens`); an injection that carries one says so, so that a
401 can be judged (:mod:`gatehouse_proxy.credentials.token_refusals`) and the token renewed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gatehouse_contract import sent_forms
from gatehouse_contract.keyring import KeyringError, KeyringFile
from gatehouse_contract.routes import ConnectionRoute
from gatehouse_proxy.credentials import oauth2_tokens
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey, FleetTokens
from gatehouse_proxy.credentials.google_tokens import GoogleMinter
from gatehouse_proxy.credentials.token_grants import MintedToken, TokenClient
from gatehouse_proxy.credentials.token_refusals import Judged
from gatehouse_proxy.errors import ProxyError


@dataclass
class Injection:
    headers: dict[str, str] = field(default_factory=dict)
    query: tuple[str, str] | None = None
    # Every form the injected value is sent in (sent_forms), the value as read first: nothing the
    # upstream echoes back may carry one.
    secrets: tuple[str, ...] = ()
    # A minted token's credential: a 401 is judged, and one retry may get another token.
    minted: CredentialKey | None = None

    @property
    def token(self) -> str:
        return self.secrets[0] if self.secrets else ""


def credential_key(connection: ConnectionRoute) -> CredentialKey:
    """A minted token's key: a new secret (re-encrypted), scope, token URL or client is another
    token, so a token never outlives what it was issued for."""
    credential = connection.credential
    parts = [credential.type, credential.fingerprint, *sorted(credential.scopes)]
    request = credential.token_request
    if request is not None:
        parts += [
            request.url,
            request.client_id,
            request.client_authentication,
            *(f"{name}={value}" for name, value in request.parameters),
        ]
    return CredentialKey.of(connection.key, connection.uid, parts)


def mints_tokens(connection: ConnectionRoute) -> bool:
    return connection.credential.type in ("googleServiceAccount", "oauth2ClientCredentials")


def injected_header_names(connection: ConnectionRoute) -> frozenset[str]:
    """The names :meth:`Injector.injection` sends the credential under, known before it is
    decrypted or minted: the headers the upstream gets are settled (and checked) before then."""
    credential = connection.credential
    if credential.type == "none":
        return frozenset()
    if credential.type == "apiKey":
        return frozenset() if credential.location == "query" else frozenset({credential.parameter})
    return frozenset({"Authorization"})


class Injector:
    def __init__(
        self,
        keyring: KeyringFile,
        tokens: FleetTokens,
        google: GoogleMinter,
        token_client: TokenClient,
    ) -> None:
        self.keyring = keyring
        self.tokens = tokens
        self.google = google
        self.token_client = token_client

    def _decrypt(self, connection: ConnectionRoute) -> bytes:
        credential = connection.credential
        if credential.encrypted is None:
            raise ProxyError("connection_unavailable", "the connection has no credential")
        try:
            keyring = self.keyring.current()
            if credential.encrypted.key_id not in keyring.key_ids:
                # Encrypted with a key added since the keyring was last looked at.
                keyring = self.keyring.current(fresh=True)
            return keyring.decrypt(
                credential.encrypted, credential.context(connection.uid, connection.origin)
            )
        except KeyringError:
            raise ProxyError(
                "connection_unavailable", "the connection's credential cannot be decrypted here"
            ) from None

    async def injection(
        self, connection: ConnectionRoute, *, shared: bool = True, refused: str = ""
    ) -> Injection:
        """``shared=False``: a minted token stays with this worker (a draft's test).
        ``refused``: a minted token the upstream refused this request: another is injected."""
        credential = connection.credential
        if credential.type == "none":
            return Injection()
        if credential.type in ("bearer", "basic"):
            secret = self._decrypt(connection).decode()
            sent = (sent_forms.bearer if credential.type == "bearer" else sent_forms.basic)(secret)
            return Injection(headers={"Authorization": sent.value}, secrets=sent.forms)
        if credential.type == "apiKey":
            secret = self._decrypt(connection).decode()
            if credential.location == "query":
                # Encoded where the query is put together (query.upstream_query).
                forms = sent_forms.query_value(secret).forms
                return Injection(query=(credential.parameter, secret), secrets=forms)
            sent = sent_forms.header_value(secret)
            return Injection(headers={credential.parameter: sent.value}, secrets=sent.forms)
        key = credential_key(connection)
        token = await self.tokens.token(
            key,
            lambda: self._mint(connection, key),
            shared=shared,
            # A second past the token request's own deadline, so that its reason is the one
            # given when it is this request's own mint that runs out of time.
            within=connection.limits.timeout_seconds + 1,
            refused=refused,
        )
        sent = sent_forms.bearer(token)
        return Injection(headers={"Authorization": sent.value}, secrets=sent.forms, minted=key)

    async def _mint(self, connection: ConnectionRoute, key: CredentialKey) -> MintedToken:
        credential = connection.credential
        if credential.type == "googleServiceAccount":
            return await self.google.mint(key, self._decrypt(connection), credential.scopes)
        if credential.token_request is None:
            raise ProxyError("connection_unavailable", "the connection has no token request")
        secret = self._decrypt(connection).decode()
        return await oauth2_tokens.mint(
            self.token_client,
            credential.token_request,
            credential.scopes,
            secret,
            # Within the connection's own time as well: a request waits for its token.
            seconds=min(oauth2_tokens.TOKEN_TIMEOUT_SECONDS, connection.limits.timeout_seconds),
        )

    async def refused(
        self, injection: Injection, endpoint: str, *, shared: bool = True
    ) -> Judged | None:
        """The upstream answered 401 to ``injection`` on ``endpoint``: what it says of the
        minted token it carried (None: it carried none)."""
        if injection.minted is None:
            return None
        return await self.tokens.refused(injection.minted, injection.token, endpoint, shared=shared)

    def forget(self, keep: set[CredentialKey]) -> None:
        self.tokens.forget(keep)
        self.google.forget(keep)

    def discard(self, connection: ConnectionRoute) -> None:
        key = credential_key(connection)
        self.tokens.discard(key)
        self.google.discard(key)
