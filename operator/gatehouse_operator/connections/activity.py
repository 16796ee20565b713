"""What apps did with connections, for those who may see it: a connection's or an app's recent
requests (the inspector) and a connection's usage per app.

No rule of its own decides who sees what: a connection's requests and usage go to whoever may
see the connection (``Connections.visible``: 404 and 403 as for its details); an app's requests
to whoever may update the app (as the page's Link form asks), 403 otherwise, 404 when there is
no such app, and of those, the ones through a connection the caller may not see are shown as
build-spec shows a link to it (``Connections.seen``): when, the app, the connection's name and
how the app was answered, not what it asked. Every answer is of one namespace's routing keys,
so no one sees another's. The service API, the page and ``gatehouse requests`` all show what
this module answers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping

from gatehouse_contract.activity import MAX_RECENT, Position, RecentRequest, RequestsQuery
from gatehouse_contract.numerals import whole_number
from gatehouse_operator.access.reviews import User
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.connections import request_cursor
from gatehouse_operator.connections.actions import Connections
from gatehouse_operator.connections.errors import Refused
from gatehouse_operator.connections.models import (
    AppUsage,
    ConnectionUsage,
    HiddenRequestView,
    RecentRequests,
    RecentRequestView,
    UsagePoint,
)
from gatehouse_operator.table.gather import Busy, Gathering
from gatehouse_operator.table.usage import Window


class Activity:
    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self.gatherer = connections.runtime.gatherer

    async def connection_requests(
        self,
        user: User,
        namespace: str,
        name: str,
        since: float = 0.0,
        limit: int = 100,
        after: Mapping[str, Position] | None = None,
    ) -> RecentRequests:
        """The connection's newest requests; ``after`` a follower's cursor, the next ones."""
        await self.connections.visible(user, namespace, name)
        query = RequestsQuery(connection=f"{namespace}/{name}", since=since, limit=limit)
        return _requests(await self._recent(namespace, query, after), after)

    async def app_requests(
        self,
        user: User,
        namespace: str,
        kind: Kind,
        name: str,
        since: float = 0.0,
        limit: int = 100,
        after: Mapping[str, Position] | None = None,
    ) -> RecentRequests:
        await self.connections.require(user, "update", kind, namespace, name)
        if await self.connections.runtime.kube.resources.get_custom(kind, namespace, name) is None:
            raise Refused(404, "not_found", f"no {kind.kind} {name!r} in namespace {namespace}")
        query = RequestsQuery(app=f"{namespace}/{kind.kind}/{name}", since=since, limit=limit)
        found = await self._recent(namespace, query, after)
        # An app's records may be of any connection it ever called: each is shown as far as the
        # caller may see that connection, by the rule build-spec follows.
        through = {connection_name(record) for _, record in found.requests} - {""}
        seen = await self.connections.seen(user, namespace, through)
        return _requests(found, after, hidden=through - seen.keys())

    async def connection_usage(
        self, user: User, namespace: str, name: str, window: Window
    ) -> ConnectionUsage:
        await self.connections.visible(user, namespace, name)
        return await self.usage(namespace, name, window)

    async def usage(self, namespace: str, name: str, window: Window) -> ConnectionUsage:
        """A connection's usage, for a caller already shown the connection (the page, after
        ``Connections.connection_detail``)."""
        # What the replicas counted since the last turn; when busy, the history as the last
        # collection left it (at most 10 s old).
        with contextlib.suppress(Busy):
            await self.gatherer.usage(namespace)
        history = self.gatherer.channel.usage.of_connection(f"{namespace}/{name}", window)
        apps = [
            AppUsage(
                app=app.partition("/")[2],
                points=[
                    UsagePoint(
                        start=bucket.start,
                        requests=bucket.requests,
                        errors=bucket.errors,
                        p95_ms=bucket.p95_ms,
                        cached=bucket.cached,
                    )
                    for bucket in buckets
                ],
            )
            for app, buckets in history.items()
        ]
        return ConnectionUsage(window=window, apps=apps)

    async def _recent(
        self, namespace: str, query: RequestsQuery, after: Mapping[str, Position] | None
    ) -> Gathering:
        try:
            return await self.gatherer.recent(namespace, query, after)
        except Busy as busy:
            raise Refused(429, "too_many_requests", f"{busy}: try again in a second") from None


def limit_of(raw: str | None) -> int:
    """A ``limit`` query parameter: 1 to MAX_RECENT, 100 when absent."""
    if raw is None or raw == "":
        return 100
    limit = whole_number(raw)
    if limit is None or not 1 <= limit <= MAX_RECENT:
        raise Refused(400, "invalid_request", f"limit: a whole number from 1 to {MAX_RECENT}")
    return limit


def since_of(raw: str | None) -> float:
    """A ``since`` query parameter: seconds since the epoch, 0 when absent."""
    if raw is None or raw == "":
        return 0.0
    try:
        since = float(raw)
    except ValueError:
        since = -1.0
    if not 0 <= since < 1e11:
        raise Refused(400, "invalid_request", "since: seconds since the epoch (a number)")
    return since


def window_of(raw: str | None) -> Window:
    if raw in (None, "", "hour"):
        return "hour"
    if raw == "day":
        return "day"
    raise Refused(400, "invalid_request", "window: hour or day")


def connection_name(record: RecentRequest) -> str:
    """The connection a record's fetch went through (its routing key's name); empty when the
    alias named none."""
    return record.connection.partition("/")[2]


def hidden_reason(connections: Collection[str]) -> str:
    """Why the requests through ``connections`` are shown without their details: the same
    words whether a connection is AdminsOnly or gone."""
    if not connections:
        return ""
    listed = ", ".join(repr(name) for name in sorted(connections))
    return (
        f"you may not see connection {listed}, so its requests show when, which app, the "
        "status and the proxy's code, not the method, path, duration or sizes (as build-spec "
        "leaves out its details): they are shown to those who may update it, or link it when "
        "its linkPolicy is Builders"
    )


def _view(
    replica: str, record: RecentRequest, hidden: bool
) -> RecentRequestView | HiddenRequestView:
    app, connection = record.app.partition("/")[2], connection_name(record)
    if hidden:
        return HiddenRequestView(
            time=record.time,
            app=app,
            connection=connection,
            status=record.status,
            code=record.code,
            replica=replica,
            trace_id=record.trace_id,
        )
    return RecentRequestView(
        time=record.time,
        app=app,
        connection=connection,
        method=record.method,
        path=record.path,
        status=record.status,
        code=record.code,
        duration_ms=round(record.duration_ms, 3),
        request_bytes=record.request_bytes,
        response_bytes=record.response_bytes,
        replica=replica,
        trace_id=record.trace_id,
        viewer=record.viewer,
        cache=record.cache,
    )


def _requests(
    found: Gathering, after: Mapping[str, Position] | None, hidden: Collection[str] = ()
) -> RecentRequests:
    """The records as shown; those through a connection in ``hidden`` (connections some of
    them went through) without their details; the cursor to follow them with."""
    return RecentRequests(
        items=[
            _view(replica, record, connection_name(record) in hidden)
            for replica, record in found.requests
        ],
        replicas_asked=found.asked,
        replicas_answered=found.answered,
        hidden_reason=hidden_reason(hidden),
        cursor=request_cursor.written(after, found.positions),
        lost=found.lost,
    )
