"""Credential injection as the request path calls it: each call dispatched to the injector of the
connection's auth kind (:mod:`gatehouse_proxy.credentials.kinds`), made once per worker.

What a kind sends, and how it is decrypted or minted, is the kind's
(:mod:`gatehouse_proxy.credentials.injecting`); what a 401 to a minted token says is the fleet's
(:mod:`gatehouse_proxy.credentials.fleet_tokens`, :mod:`gatehouse_proxy.credentials.
token_refusals`). A new kind changes nothing here.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import AuthType, ConnectionRoute
from gatehouse_proxy.credentials.fleet_grants import FleetGrants
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey, FleetTokens
from gatehouse_proxy.credentials.google_tokens import GoogleMinter
from gatehouse_proxy.credentials.injecting import CredentialInjector, Injection, Sending, Sources
from gatehouse_proxy.credentials.kinds import KINDS
from gatehouse_proxy.credentials.token_grants import TokenClient
from gatehouse_proxy.credentials.token_refusals import Judged

__all__ = [
    "Injection",
    "Injector",
    "Sending",
    "credential_key",
    "injected_header_names",
    "injected_query_parameter",
    "mints_tokens",
    "sends_credential",
]


def credential_key(connection: ConnectionRoute) -> CredentialKey:
    """A minted token's key: a new secret (re-encrypted), scope, token URL or client is another
    token, so a token never outlives what it was issued for."""
    return KINDS[connection.credential.type].credential_key(connection)


def mints_tokens(connection: ConnectionRoute) -> bool:
    return KINDS[connection.credential.type].mints


def sends_credential(connection: ConnectionRoute) -> bool:
    return KINDS[connection.credential.type].sends


def injected_query_parameter(connection: ConnectionRoute) -> str | None:
    """The query parameter :meth:`Injector.injection` sends the credential in, if any."""
    credential = connection.credential
    return KINDS[credential.type].query_parameter(credential)


def injected_header_names(connection: ConnectionRoute) -> frozenset[str]:
    """The names :meth:`Injector.injection` sends the credential under, known before it is
    decrypted or minted: the headers the upstream gets are settled (and checked) before then."""
    credential = connection.credential
    return KINDS[credential.type].header_names(credential)


class Injector:
    def __init__(
        self,
        keyring: KeyringFile,
        tokens: FleetTokens,
        google: GoogleMinter,
        token_client: TokenClient,
        grants: FleetGrants,
    ) -> None:
        self.tokens = tokens
        sources = Sources(keyring, tokens, google, token_client, grants)
        self._kinds: dict[AuthType, CredentialInjector] = {
            kind: make(sources) for kind, make in KINDS.items()
        }

    def injection(
        self,
        connection: ConnectionRoute,
        *,
        shared: bool = True,
        refused: str = "",
        viewer: str = "",
    ) -> Coroutine[Any, Any, Injection]:
        """``shared=False``: a minted token stays with this worker (a draft's test).
        ``refused``: a minted token the upstream refused this request: another is injected.
        ``viewer``: the verified viewer's owner name (``Viewer.owner``), "" when none.
        (The kind's own coroutine, awaited by the caller: no frame of its own per request.)"""
        injector = self._kinds[connection.credential.type]
        return injector.inject(connection, shared=shared, refused=refused, viewer=viewer)

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
        for injector in self._kinds.values():
            injector.forget(keep)

    def discard(self, connection: ConnectionRoute) -> None:
        self._kinds[connection.credential.type].discard(connection)
