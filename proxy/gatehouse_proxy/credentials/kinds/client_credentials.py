"""``oauth2ClientCredentials``: a token the connection's client asks its token URL for (RFC 6749
4.4, :mod:`gatehouse_proxy.credentials.oauth2_tokens`), with the client secret the connection
keeps encrypted; minted once for the fleet as every minted kind's."""

from __future__ import annotations

from gatehouse_contract.routes import ConnectionRoute
from gatehouse_proxy.credentials import injecting, oauth2_tokens
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey
from gatehouse_proxy.credentials.injecting import Sources, decrypt
from gatehouse_proxy.credentials.minting import MintedTokens
from gatehouse_proxy.credentials.token_grants import MintedToken
from gatehouse_proxy.errors import ProxyError


class ClientCredentials(MintedTokens):
    def __init__(self, sources: Sources) -> None:
        super().__init__(sources)
        self.client = sources.token_client

    @staticmethod
    def credential_key(connection: ConnectionRoute) -> CredentialKey:
        """Another token URL, client or parameter is another token too."""
        request = connection.credential.token_request
        if request is None:
            return injecting.credential_key(connection)
        return injecting.credential_key(
            connection,
            request.url,
            request.client_id,
            request.client_authentication,
            *(f"{name}={value}" for name, value in request.parameters),
        )

    async def mint(self, connection: ConnectionRoute, key: CredentialKey) -> MintedToken:
        credential = connection.credential
        if credential.token_request is None:
            raise ProxyError("connection_unavailable", "the connection has no token request")
        secret = decrypt(self.keyring, connection).decode()
        return await oauth2_tokens.mint(
            self.client,
            credential.token_request,
            credential.scopes,
            secret,
            # Within the connection's own time as well: a request waits for its token.
            seconds=min(oauth2_tokens.TOKEN_TIMEOUT_SECONDS, connection.limits.timeout_seconds),
        )
