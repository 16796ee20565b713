"""The fetch endpoint: ``{METHOD} /v1/fetch/{alias}/{path}?{query}`` with ``Authorization: Bearer
<the app's credential>``.

The door makes the request's :class:`~gatehouse_proxy.observation.fetch.Fetch` once, finds the
table, the app its token names and the connection its alias links, passes the request through
the rules to the vendor (:meth:`Passage.through <gatehouse_proxy.passage.steps.Passage.through>`),
relays the answer, and hands the finished fetch to each observer in order
(:mod:`gatehouse_proxy.observation.observers`). The first check that fails answers with its
:class:`~gatehouse_proxy.errors.ProxyError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from urllib.parse import unquote

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from gatehouse_contract.redaction import Redactor
from gatehouse_contract.routes import AppRoute, ConnectionRoute
from gatehouse_proxy.caching.response_cache import Served
from gatehouse_proxy.door.cached_answer import CachedResponse, relayed_status
from gatehouse_proxy.door.entrance import FETCH_PATH, identified_app
from gatehouse_proxy.door.incoming import AppRequest, AppWentAway, header
from gatehouse_proxy.door.relay import RelayedResponse
from gatehouse_proxy.errors import ProxyError, error_response
from gatehouse_proxy.observation import metrics
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.observation.observers import Observer
from gatehouse_proxy.passage.routing import available, current_table
from gatehouse_proxy.passage.steps import Passage
from gatehouse_proxy.table.feed import TableStore
from gatehouse_proxy.table.routing_table import RoutingTable

log = logging.getLogger("gatehouse.proxy")

FETCH_PREFIX = FETCH_PATH.encode()


class FetchEndpoint:
    def __init__(
        self,
        table: TableStore,
        passage: Passage,
        observers: Sequence[Observer],
        read_timeout_seconds: float,
    ) -> None:
        self.table = table
        self.passage = passage
        self.tracing = passage.tracing
        self.observers = observers
        self.read_timeout_seconds = read_timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracing = self.tracing
        with tracing.fetch(scope["headers"], scope["method"]):
            raw = scope.get("raw_path") or scope["path"].encode()
            alias, _, rest = raw[len(FETCH_PREFIX) :].partition(b"/")
            fetch = Fetch(
                scope["method"],
                b"/" + rest,
                scope["query_string"],
                header(scope, b"traceparent"),
                time.perf_counter(),
            )
            request = AppRequest(scope, receive, self.read_timeout_seconds)
            response: RelayedResponse | CachedResponse | JSONResponse
            try:
                response = await self._forward(fetch, request, unquote(alias.decode("latin-1")))
            except ProxyError as error:
                response = error_response(error)
                fetch.status = error.status
                fetch.code = error.code
            except AppWentAway:
                return
            fetch.answered = time.perf_counter()
            try:
                with tracing.phase("scrub"):
                    await response(scope, receive, send)
            finally:
                if isinstance(response, RelayedResponse | CachedResponse):
                    fetch.cut, fetch.sent = response.cut_code, response.sent_bytes
                else:
                    fetch.sent = len(response.body)
                fetch.received = request.received
                fetch.trace_id = tracing.trace_id()
                fetch.finished = time.perf_counter()
                fetch.ended_at = time.time()
                for observer in self.observers:
                    observer.observe(fetch)

    async def _forward(
        self, fetch: Fetch, request: AppRequest, alias: str
    ) -> RelayedResponse | CachedResponse:
        """The table, the app, the connection (each filled in on ``fetch`` as it is known), then
        the request's way through the rules to the vendor (or the cache); the answer to relay."""
        active = current_table(self.table)
        app = app_of(identified_app(request.scope, active))
        fetch.app, fetch.app_uid = app.key, app.uid or app.key
        connection = connection_of(active, app, alias)
        fetch.connection = connection.key
        passed = await self.passage.through(fetch, connection, request)
        if isinstance(passed, Served):
            fetch.status = passed.answer.status
            return CachedResponse(passed, self.passage.cache.clock())
        upstream, injection, place, standing = passed
        fetch.status = upstream.status

        def cut(error: ProxyError) -> None:
            log.warning(
                "cut off the answer from %s to %s: %s (%s)",
                connection.key,
                app.key,
                error.code,
                error.message,
            )
            metrics.count_cut(
                metrics.Labels(app=app.key, connection=connection.key, code=error.code)
            )

        try:
            # One redactor for the answer's headers and body.
            redact = Redactor(injection.secrets) if injection.secrets else None
            whole = upstream.whole_body()
            own = standing.headers()
            if fetch.cache:
                # Past the cache: which way, and what the vendor answered (RFC 9211).
                own = [*own, relayed_status(fetch.cache, upstream.status)]
            return RelayedResponse(upstream, redact, whole, own, on_cut=cut, on_end=place.release)
        except BaseException:
            upstream.release()
            place.release()
            raise


def app_of(app: AppRoute | None) -> AppRoute:
    """The app a request's token identified, or the refusal of a request that names none."""
    if app is None:
        raise ProxyError("unauthenticated", "send the app's credential as Authorization: Bearer")
    return app


def linked_connection(active: RoutingTable, app: AppRoute, alias: str) -> ConnectionRoute:
    """The connection the app links under ``alias``, available or not."""
    key = app.links.get(alias)
    connection = active.connections.get(key) if key else None
    if connection is None:
        raise ProxyError("unknown_alias", f"no connection is linked under the alias {alias!r}")
    return connection


def connection_of(active: RoutingTable, app: AppRoute, alias: str) -> ConnectionRoute:
    return available(linked_connection(active, app, alias))
