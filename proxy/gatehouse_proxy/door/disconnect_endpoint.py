"""The disconnect endpoint: ``DELETE /v1/grants/{alias}`` with the app's credential and the
viewer's assertion: the viewer's grant on the connection the alias links is dropped, and its
refresh token revoked at the provider where the connection names a revocation URL (RFC 7009).

An app offers "Disconnect" to the person signed in to it; it can disconnect only the viewer its
assertion names (verified as a fetch's is: signature, issuer, audience, lifetime, this app), and
only on a connection it links. A connection's shared account is disconnected by an admin, from
the connection's page, never by an app. Answers ``{"disconnected": true|false}`` (false: there
was no grant). A connection routed as unavailable (its secret missing, say) still disconnects:
the grant is dropped, its revocation left out when the client cannot be had. The alias is read
from the raw path, decoded once, as a fetch's is; the request takes the tenant's first turn as a
fetch does (entrance.FirstTurn).
"""

from __future__ import annotations

from urllib.parse import unquote

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from gatehouse_proxy.credentials.connecting import Connecting
from gatehouse_proxy.credentials.fleet_grants import owner_digest
from gatehouse_proxy.door.entrance import GRANTS_PATH, identified_app
from gatehouse_proxy.door.fetch_endpoint import app_of, linked_connection
from gatehouse_proxy.door.incoming import AppRequest
from gatehouse_proxy.errors import ProxyError, error_response
from gatehouse_proxy.passage.routing import current_table
from gatehouse_proxy.rules import headers as header_policy
from gatehouse_proxy.store.shared_store import StoreUnavailable
from gatehouse_proxy.table.feed import TableStore
from gatehouse_proxy.viewers.assertions import Verifier

GRANTS_PREFIX = GRANTS_PATH.encode()


class DisconnectEndpoint:
    def __init__(
        self, table: TableStore, viewers: Verifier, connecting: Connecting, timeout: float
    ) -> None:
        self.table = table
        self.viewers = viewers
        self.connecting = connecting
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw: bytes = scope.get("raw_path") or scope["path"].encode()
        alias = unquote(raw[len(GRANTS_PREFIX) :].decode("latin-1"))
        try:
            response = JSONResponse(
                {"disconnected": await self._disconnect(scope, receive, alias) > 0},
                headers={"Cache-Control": "no-store"},
            )
        except ProxyError as error:
            response = error_response(error)
        except StoreUnavailable:
            response = error_response(
                ProxyError(
                    "connection_unavailable",
                    "the shared store, where grants are kept, does not answer: try again",
                )
            )
        await response(scope, receive, send)

    async def _disconnect(self, scope: Scope, receive: Receive, alias: str) -> int:
        active = current_table(self.table)
        app = app_of(identified_app(scope, active))
        connection = linked_connection(active, app, alias)
        authorization = connection.credential.authorization
        if authorization is None or authorization.credential_scope != "viewer":
            raise ProxyError(
                "method_not_allowed",
                "only a connection of each viewer's own account (oauth2AuthorizationCode, "
                "credentialScope viewer) has a viewer's grant to disconnect",
            )
        request = AppRequest(scope, receive, self.timeout)
        viewer = await self.viewers.viewer(
            header_policy.viewer_assertions(request.headers()), app.key
        )
        return await self.connecting.disconnect(connection, owner_digest(viewer.owner))
