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
from gatehouse_proxy.credentials.fleet_grants import SHARED, AuthorizationRequired, GrantClient
from gatehouse_proxy.credentials.fleet_tokens import CredentialKey
from gatehouse_proxy.credentials.grant_changes import grant_client
from gatehouse_proxy.credentials.injecting import Injection, Kind, Sources


class AuthorizationCode(Kind):
    mints: ClassVar[bool] = True

    def __init__(self, sources: Sources) -> None:
        super().__init__(sources)
        self.grants = sources.grants
        # Per route (the object the table holds, replaced when the route changes): its client,
        # the secret decrypted, and what its owners' keys are made of. A request of a viewer
        # connection otherwise decrypted and hashed them again (~8 us of its ~450).
        self._prepared: dict[str, tuple[ConnectionRoute, GrantClient, list[str]]] = {}

    @staticmethod
    def credential_key(connection: ConnectionRoute) -> CredentialKey:
        """The connection's grants' identity (a changed client, token URL or scope is another
        grant); each owner's token is kept under a key of its own: these parts and the owner."""
        return injecting.credential_key(connection, connection.credential.grant_identity)

    async def inject(
        self, connection: ConnectionRoute, *, shared: bool, refused: str, viewer: str
    ) -> Injection:
        owner = owner_of(connection, viewer)
        client, parts = self._prepare(connection)
        token = await self.grants.access_token(
            connection,
            owner,
            client,
            # A second past the refresh's own deadline, as a minted token's (MintedTokens).
            within=connection.limits.timeout_seconds + 1,
            refused=refused,
        )
        sent = sent_forms.bearer(token)
        return Injection(
            headers={"Authorization": sent.value},
            secrets=sent.forms,
            # What a 401 to the owner's token is judged under: the owner's own.
            minted=CredentialKey.of(connection.key, connection.uid, [*parts, owner]),
        )

    def _prepare(self, connection: ConnectionRoute) -> tuple[GrantClient, list[str]]:
        kept = self._prepared.get(connection.key)
        if kept is None or kept[0] is not connection:
            parts = injecting.key_parts(connection, connection.credential.grant_identity)
            kept = (connection, grant_client(self.keyring, connection), parts)
            self._prepared[connection.key] = kept
        return kept[1], kept[2]

    def forget(self, keep: set[CredentialKey]) -> None:
        uids = {key.connection_uid for key in keep}
        self.grants.forget(uids)
        self._prepared = {key: kept for key, kept in self._prepared.items() if kept[0].uid in uids}

    def discard(self, connection: ConnectionRoute) -> None:
        """A draft's test keeps nothing of a grant beyond the fleet's: its client goes too."""
        kept = self._prepared.get(connection.key)
        if kept is not None and kept[0] is connection:
            del self._prepared[connection.key]


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
