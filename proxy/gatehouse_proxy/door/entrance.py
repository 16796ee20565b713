"""The app port's ASGI application: fetches, a viewer's disconnect, the liveness answer, and
nothing else.

Three paths need no framework: Starlette's router, middleware stack, ``Request`` and streaming
response cost more per request than every check the proxy makes (docs/development/performance.md,
"Where a request's time goes (the profile)"). So the app port is plain ASGI, in the order the checks
always ran: the tenant's first turn (:class:`FirstTurn`), then the route, then the fetch's own
checks. Unknown paths answer 404 and methods outside :data:`METHODS` 405, with the texts Starlette
gave them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from gatehouse_contract.routes import AppRoute, namespace_of
from gatehouse_proxy.door.incoming import header
from gatehouse_proxy.limits.tenancy import Turns
from gatehouse_proxy.table.routing_table import RoutingTable

FETCH_PATH = "/v1/fetch/"
# DELETE /v1/grants/{alias}: the viewer disconnects their account (door.disconnect_endpoint).
GRANTS_PATH = "/v1/grants/"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_HEALTH_METHODS = ("GET", "HEAD")


def bearer_token(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer`` value, if that is what it is."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


# Where the app a request's token names is kept for the request, with the table it was found in.
_IDENTIFIED = "gatehouse.identified"


def identified_app(scope: Scope, table: RoutingTable) -> AppRoute | None:
    """The app whose token the request carries in ``table``, looked up once per request (the
    first turn needs it before the route does, and hashing the token is not free)."""
    known = scope.get(_IDENTIFIED)
    if known is not None and known[0] is table:
        return known[1]  # type: ignore[no-any-return]
    token = bearer_token(header(scope, b"authorization") or "")
    app = None if token is None else table.app_for_token(token)
    scope[_IDENTIFIED] = (table, app)
    return app


class FirstTurn:
    """A request's first turn (see :class:`tenancy.Turns`), taken before any routing.

    A tenant's requests arrive together too (refused requests retried after the same
    ``Retry-After``), and everything a request does before its first turn runs in the loop
    iteration it arrived in. So the tenant is told from the app's bearer token as soon as the
    request's head is parsed: a burst of a hundred requests is then spread over the iterations
    after a few microseconds each, not routed and checked all at once. Requests without a known
    token share one tenant, so a flood of them is spread as well.
    """

    def __init__(
        self, app: ASGIApp, turns: Turns, table: Callable[[], RoutingTable | None]
    ) -> None:
        self.app = app
        self.turns = turns
        self.table = table

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Only fetches and disconnects: the liveness answer must not queue behind anyone's burst.
        if scope["type"] == "http" and scope["path"].startswith((FETCH_PATH, GRANTS_PATH)):
            await self.turns.take(self._tenant(scope))
        await self.app(scope, receive, send)

    def _tenant(self, scope: Scope) -> str:
        table = self.table()
        app = None if table is None else identified_app(scope, table)
        return "" if app is None else namespace_of(app.key)


Lifespan = Callable[[], AbstractAsyncContextManager[None]]


class Routes:
    """Which of the app port's answers a request gets, and the process's lifespan."""

    def __init__(self, fetch: ASGIApp, disconnect: ASGIApp, lifespan: Lifespan) -> None:
        self.fetch = fetch
        self.disconnect = disconnect
        self.lifespan = lifespan

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        else:  # a WebSocket: no route takes one
            await send({"type": "websocket.close", "code": 1000})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        method: str = scope["method"]
        if path.startswith(FETCH_PATH) and path[len(FETCH_PATH) :].partition("/")[0]:
            allowed: tuple[str, ...] = METHODS
            if method in allowed:
                await self.fetch(scope, receive, send)
                return
        elif path.startswith(GRANTS_PATH) and "/" not in path[len(GRANTS_PATH) :]:
            allowed = ("DELETE",)
            if method in allowed:
                await self.disconnect(scope, receive, send)
                return
        elif path == "/healthz":
            allowed = _HEALTH_METHODS
            if method in allowed:
                await PlainTextResponse("ok")(scope, receive, send)
                return
        else:
            await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
            return
        answer = PlainTextResponse(
            "Method Not Allowed", status_code=405, headers={"Allow": ", ".join(allowed)}
        )
        await answer(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        started = False
        try:
            async with self.lifespan():
                await send({"type": "lifespan.startup.complete"})
                started = True
                await receive()  # lifespan.shutdown
        except Exception as error:
            failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            await send({"type": failed, "message": repr(error)})
            raise
        await send({"type": "lifespan.shutdown.complete"})
