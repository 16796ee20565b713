"""Credential injectors: what each auth type adds to an upstream request.

The sealed secret is opened here, for the one request being made, and the plain value lives only
in the returned :class:`Injection` until the request is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gatehouse_contract.routes import ConnectionRoute
from gatehouse_contract.sealing import KeyringError, KeyringFile
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.google_tokens import GoogleTokenSource


@dataclass
class Injection:
    headers: dict[str, str] = field(default_factory=dict)
    query: tuple[str, str] | None = None
    # The injected values themselves, so nothing the upstream echoes back can carry them.
    secrets: tuple[str, ...] = ()

    @property
    def header_names(self) -> set[str]:
        return {name.lower() for name in self.headers}


def token_cache_key(connection: ConnectionRoute) -> tuple[str, ...]:
    """Google tokens are cached per connection, key file and scopes: a new key file or a
    re-seal gets a new entry, so a token never outlives the key it was issued for."""
    credential = connection.credential
    return (connection.uid, credential.fingerprint, *sorted(credential.scopes))


class Injector:
    def __init__(self, keyring: KeyringFile, google: GoogleTokenSource) -> None:
        self.keyring = keyring
        self.google = google

    def _open(self, connection: ConnectionRoute) -> bytes:
        credential = connection.credential
        if credential.sealed is None:
            raise ProxyError("connection_unavailable", "the connection has no credential")
        try:
            keyring = self.keyring.current()
            if credential.sealed.key_id not in keyring.key_ids:
                # Sealed with a key added since the keyring was last looked at.
                keyring = self.keyring.current(fresh=True)
            return keyring.open(
                credential.sealed, credential.context(connection.uid, connection.origin)
            )
        except KeyringError:
            raise ProxyError(
                "connection_unavailable", "the connection's credential cannot be decrypted here"
            ) from None

    async def injection(self, connection: ConnectionRoute) -> Injection:
        credential = connection.credential
        if credential.type == "none":
            return Injection()
        if credential.type == "bearer":
            secret = self._open(connection).decode()
            return Injection(headers={"Authorization": f"Bearer {secret}"}, secrets=(secret,))
        if credential.type == "apiKey":
            secret = self._open(connection).decode()
            if credential.location == "query":
                return Injection(query=(credential.parameter, secret), secrets=(secret,))
            return Injection(headers={credential.parameter: secret}, secrets=(secret,))
        token = await self.google.token(
            token_cache_key(connection), credential.scopes, lambda: self._open(connection)
        )
        return Injection(headers={"Authorization": f"Bearer {token}"}, secrets=(token,))
