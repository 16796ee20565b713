"""The generic kinds (Envoy's generic credential injector): a secret sent as it is stored, or
none. Each is decrypted for the one request and sent in one place; every form it is sent in is
on the injection, for the scrubber."""

from __future__ import annotations

from typing import ClassVar

from gatehouse_contract import sent_forms
from gatehouse_contract.routes import ConnectionRoute, Credential
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey
from gatehouse_proxy.credentials.injecting import (
    NO_HEADERS,
    Injection,
    Kind,
    decrypt,
)


class Generic(Kind):
    """What the generic kinds share: nothing minted, nothing held between requests."""

    mints: ClassVar[bool] = False

    def forget(self, keep: set[CredentialKey]) -> None:
        """Nothing is held."""

    def discard(self, connection: ConnectionRoute) -> None:
        """Nothing is held."""


class NoCredential(Generic):
    """``none``: the upstream is called as it is."""

    sends: ClassVar[bool] = False

    @staticmethod
    def header_names(credential: Credential) -> frozenset[str]:
        return NO_HEADERS

    async def inject(
        self, connection: ConnectionRoute, *, shared: bool, refused: str, viewer: str
    ) -> Injection:
        return Injection()


class SentAsStored(Generic):
    """A kind whose stored secret is sent as it is, in the form the contract says
    (:func:`gatehouse_contract.sent_forms.secret_sent`), in ``Authorization`` unless a subclass
    says otherwise."""

    def sent(self, connection: ConnectionRoute) -> tuple[str, sent_forms.Sent]:
        secret = decrypt(self.keyring, connection).decode()
        return secret, sent_forms.secret_sent(connection.credential, secret)

    async def inject(
        self, connection: ConnectionRoute, *, shared: bool, refused: str, viewer: str
    ) -> Injection:
        _, sent = self.sent(connection)
        return Injection(headers={"Authorization": sent.value}, secrets=sent.forms)


class ApiKey(SentAsStored):
    """``apiKey``: the key in the header or the query parameter the connection names."""

    @staticmethod
    def header_names(credential: Credential) -> frozenset[str]:
        return NO_HEADERS if credential.location == "query" else frozenset({credential.parameter})

    @staticmethod
    def query_parameter(credential: Credential) -> str | None:
        return credential.parameter if credential.location == "query" else None

    async def inject(
        self, connection: ConnectionRoute, *, shared: bool, refused: str, viewer: str
    ) -> Injection:
        credential = connection.credential
        secret, sent = self.sent(connection)
        if credential.location == "query":
            # Encoded where the query is put together (query.upstream_query).
            return Injection(query=(credential.parameter, secret), secrets=sent.forms)
        return Injection(headers={credential.parameter: sent.value}, secrets=sent.forms)


class Bearer(SentAsStored):
    """``bearer``: ``Authorization: Bearer`` and the stored token."""


class Basic(SentAsStored):
    """``basic``: ``Authorization: Basic`` and the stored ``user:password``."""
