"""The minted kinds' one token service: a kind that mints says only how to mint.

Every minted kind (OAuth 2.0 client credentials, Google service accounts; the viewer's own
authorization code next) injects the same way: a bearer token from the fleet's one token per
credential (:mod:`gatehouse_proxy.credentials.fleet_tokens`: minted once for the fleet, renewed
once, a failing endpoint backed off), kept under the kind's credential key, marked on the
:class:`Injection` so that a 401 to it is judged (:mod:`gatehouse_proxy.credentials.
token_refusals`) and the request sent once more with another. A subclass writes :meth:`mint`,
and :meth:`credential_key` if its token depends on more than the secret and the scopes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from gatehouse_contract import sent_forms
from gatehouse_contract.routes import ConnectionRoute
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey
from gatehouse_proxy.credentials.injecting import Injection, Kind, Sources
from gatehouse_proxy.credentials.token_grants import MintedToken


class MintedTokens(Kind, ABC):
    """An injector of a minted kind (a :class:`gatehouse_proxy.credentials.injecting.
    CredentialInjector`)."""

    mints: ClassVar[bool] = True

    def __init__(self, sources: Sources) -> None:
        super().__init__(sources)
        self.tokens = sources.tokens

    async def inject(
        self, connection: ConnectionRoute, *, shared: bool, refused: str, viewer: str
    ) -> Injection:
        key = self.credential_key(connection)
        token = await self.tokens.token(
            key,
            lambda: self.mint(connection, key),
            shared=shared,
            # A second past the token request's own deadline, so that its reason is the one
            # given when it is this request's own mint that runs out of time.
            within=connection.limits.timeout_seconds + 1,
            refused=refused,
        )
        sent = sent_forms.bearer(token)
        return Injection(headers={"Authorization": sent.value}, secrets=sent.forms, minted=key)

    @abstractmethod
    async def mint(self, connection: ConnectionRoute, key: CredentialKey) -> MintedToken:
        """Asks for a new token (only when nobody in the fleet has a fresh one)."""

    def forget(self, keep: set[CredentialKey]) -> None:
        """The fleet's tokens are forgotten once for every kind (Injector.forget)."""

    def discard(self, connection: ConnectionRoute) -> None:
        self.tokens.discard(self.credential_key(connection))
