"""``googleServiceAccount``: an assertion signed with the service account's key, exchanged for a
token at the installation's Google endpoint (:mod:`gatehouse_proxy.credentials.google_tokens`,
which keeps each parsed key while it is routed); minted once for the fleet as every minted
kind's."""

from __future__ import annotations

from gatehouse_contract.routes import ConnectionRoute
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey
from gatehouse_proxy.credentials.injecting import Sources, decrypt
from gatehouse_proxy.credentials.minting import MintedTokens
from gatehouse_proxy.credentials.token_grants import MintedToken


class ServiceAccount(MintedTokens):
    def __init__(self, sources: Sources) -> None:
        super().__init__(sources)
        self.google = sources.google

    async def mint(self, connection: ConnectionRoute, key: CredentialKey) -> MintedToken:
        return await self.google.mint(
            key, decrypt(self.keyring, connection), connection.credential.scopes
        )

    def forget(self, keep: set[CredentialKey]) -> None:
        self.google.forget(keep)

    def discard(self, connection: ConnectionRoute) -> None:
        key = self.credential_key(connection)
        self.tokens.discard(key)
        self.google.discard(key)
