"""Grants dropped when the routing table says they are no longer their connection's: its client
id, token URL or scopes changed (``Credential.grant_identity``), or the connection is no longer
routed. Each worker compares each table with the one before; the first to drop a grant revokes
its refresh token at the provider's revocation endpoint (RFC 7009) where there is one, and the
others find nothing left to drop.

(A grant read under another identity is dropped where it is read too, by
:mod:`gatehouse_proxy.credentials.fleet_grants`: this drops, and revokes, the grants nobody asks
for again.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import ConnectionRoute
from gatehouse_proxy.credentials.fleet_grants import FleetGrants, GrantClient
from gatehouse_proxy.credentials.injecting import decrypt
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.store.shared_store import StoreUnavailable

log = logging.getLogger("gatehouse.proxy.grants")


def grant_client(keyring: KeyringFile, connection: ConnectionRoute) -> GrantClient:
    """The connection's OAuth 2.0 client, its secret decrypted for this one call."""
    credential = connection.credential
    if credential.token_request is None:
        raise ProxyError("connection_unavailable", "the connection has no token request")
    secret = decrypt(keyring, connection).decode()
    return GrantClient(credential.token_request, secret, credential.scopes)


def revoking(keyring: KeyringFile, connection: ConnectionRoute) -> tuple[str, GrantClient | None]:
    """Where the connection's dropped grants are revoked (RFC 7009), and the client that revokes
    them: none where it names no revocation URL, or its client cannot be had (a connection
    routed unavailable may have lost its secret); its grants are dropped all the same."""
    authorization = connection.credential.authorization
    revoke_at = "" if authorization is None else authorization.revocation_url
    if not revoke_at:
        return "", None
    try:
        return revoke_at, grant_client(keyring, connection)
    except ProxyError as error:
        log.warning(
            "the grants of connection %s are dropped, not revoked: %s",
            connection.key,
            error.message,
        )
        return "", None


class GrantChanges:
    def __init__(self, grants: FleetGrants, keyring: KeyringFile) -> None:
        self.grants = grants
        self.keyring = keyring
        # The connections taking grants in the last table, by uid.
        self._granted: dict[str, ConnectionRoute] = {}
        self._dropping: set[asyncio.Task[None]] = set()

    def follow(self, routes: Iterable[ConnectionRoute]) -> None:
        """A new table's connections: the grants of those whose grants' identity changed, or
        that left the table, are dropped (in the background); a connection routed as
        unavailable keeps them."""
        present = {route.uid: route for route in routes}
        granted = {uid: route for uid, route in present.items() if route.credential.grant_identity}
        for uid, before in self._granted.items():
            after = present.get(uid)
            if after is not None and after.unavailable and not after.credential.grant_identity:
                # Routed without its credential for now (its Secret missing, unreadable or being
                # replaced): the grants stay, for the client they were made for, until the table
                # says the client changed (each viewer would otherwise connect again).
                granted[uid] = before
                continue
            if after is None or after.credential.grant_identity != before.credential.grant_identity:
                task = asyncio.ensure_future(self._drop(before))
                self._dropping.add(task)
                task.add_done_callback(self._dropping.discard)
        self._granted = granted

    async def _drop(self, connection: ConnectionRoute) -> None:
        revoke_at, client = revoking(self.keyring, connection)
        try:
            await self.grants.drop(connection, None, revoke_at=revoke_at, client=client)
        except StoreUnavailable:
            # Each grant left is dropped where it is next read, its identity no longer the
            # connection's (or never read again, its connection gone).
            log.warning("the grants of connection %s could not be dropped", connection.key)

    async def close(self) -> None:
        """Waits for the drops under way (each bounded by the store's and the revocation's
        deadlines)."""
        await asyncio.gather(*self._dropping, return_exceptions=True)
