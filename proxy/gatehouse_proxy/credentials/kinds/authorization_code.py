"""``oauth2AuthorizationCode``: the owner's own access token (RFC 6749 4.1), from the fleet's
grants (:mod:`gatehouse_proxy.credentials.fleet_grants`: refreshed once for the fleet, the
rotated refresh token kept before the new access token is used).

The owner is the verified viewer the request is made for (``credentialScope: viewer``; the
connection needs one, ``ConnectionRoute.needs_viewer``) or the connection's one shared account
(``shared``). A 401 to the token is judged as every minted token's, under a key that names the
owner: the retry asks the grants for another token of the same owner, never anyone else's. (The
fleet's judgement reads the connection's minted token, which a grant's connection has none of: its
verdict is "replaced". The grants force a refresh for a refused token, once for the fleet, and for
the token that refresh gave only after ``FORCED_REFRESH_SECONDS``: an endpoint that refuses every
token gets its 401 back, not a refresh per request.)

No grant: :class:`AuthorizationRequired` (401 ``viewer_authorization_required``) from the grants,
telling the person to connect. The connect link the app shows them (minted from the verified
assertion, by the connect flow still to come) joins that refusal where it is raised.
"""

from __future__ import annotations

from typing import ClassVar

from gatehouse_contract import sent_forms
from gatehouse_contract.routes import ConnectionRoute
from gatehouse_proxy.credentials import injecting
from gatehouse_proxy.credentials.fleet_grants import SHARED, AuthorizationRequired
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey
from gatehouse_proxy.credentials.grant_changes import grant_client
from gatehouse_proxy.credentials.injecting import Injection, Kind, Sources


class AuthorizationCode(Kind):
    mints: ClassVar[bool] = True

    def __init__(self, sources: Sources) -> None:
        super().__init__(sources)
        self.grants = sources.grants

    @staticmethod
    def credential_key(connection: ConnectionRoute) -> CredentialKey:
        """The connection's grants' identity (a changed client, token URL or scope is another
        grant); each owner's token is kept under :func:`owner_key`."""
        return injecting.credential_key(connection, connection.credential.grant_identity)

    async def inject(
        self, connection: ConnectionRoute, *, shared: bool, refused: str, viewer: str
    ) -> Injection:
        owner = owner_of(connection, viewer)
        token = await self.grants.access_token(
            connection,
            owner,
            grant_client(self.keyring, connection),
            # A second past the refresh's own deadline, as a minted token's (MintedTokens).
            within=connection.limits.timeout_seconds + 1,
            refused=refused,
        )
        sent = sent_forms.bearer(token)
        return Injection(
            headers={"Authorization": sent.value},
            secrets=sent.forms,
            minted=owner_key(connection, owner),
        )

    def forget(self, keep: set[CredentialKey]) -> None:
        self.grants.forget({key.connection_uid for key in keep})

    def discard(self, connection: ConnectionRoute) -> None:
        """A draft's test keeps nothing of a grant beyond the fleet's."""


def owner_of(connection: ConnectionRoute, viewer: str) -> str:
    """Whose grant a request uses: the viewer's, or the connection's shared account."""
    authorization = connection.credential.authorization
    if authorization is not None and authorization.credential_scope == "shared":
        return SHARED
    if not viewer:
        # Only a connection test comes here (the request path verifies a viewer first).
        raise AuthorizationRequired(
            "the connection uses each viewer's own account, and this request names no viewer "
            "(a connection test has none)"
        )
    return viewer


def owner_key(connection: ConnectionRoute, owner: str) -> CredentialKey:
    """What a 401 to an owner's token is judged under: the owner's own."""
    return injecting.credential_key(connection, connection.credential.grant_identity, owner)
