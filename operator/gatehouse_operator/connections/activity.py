"""What apps did with connections, for those who may see it: a connection's or an app's recent
requests (the inspector) and a connection's usage per app.

No rule of its own decides who sees what: a connection's requests and usage go to whoever may
see the connection (``Connections.visible``: 404 and 403 as for its details); an app's requests
to whoever may update the app (as the page's Link form asks), 403 otherwise, 404 when there is
no such app. Every answer is of one namespace's routing keys, so no one sees another's.
"""

from __future__ import annotations

import contextlib

from gatehouse_contract.activity import MAX_RECENT, RequestsQuery
from gatehouse_operator.access.reviews import User
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.connections.actions import Connections
from gatehouse_operator.connections.errors import Refused
from gatehouse_operator.connections.models import (
    AppUsage,
    ConnectionUsage,
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
        self, user: User, namespace: str, name: str, since: float = 0.0, limit: int = 100
    ) -> RecentRequests:
        await self.connections.visible(user, namespace, name)
        query = RequestsQuery(connection=f"{namespace}/{name}", since=since, limit=limit)
        return _requests(await self._recent(namespace, query))

    async def app_requests(
        self,
        user: User,
        namespace: str,
        kind: Kind,
        name: str,
        since: float = 0.0,
        limit: int = 100,
    ) -> RecentRequests:
        await self.connections.require(user, "update", kind, namespace, name)
        if await self.connections.runtime.kube.resources.get_custom(kind, namespace, name) is None:
            raise Refused(404, "not_found", f"no {kind.kind} {name!r} in namespace {namespace}")
        query = RequestsQuery(app=f"{namespace}/{kind.kind}/{name}", since=since, limit=limit)
        return _requests(await self._recent(namespace, query))

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
                    )
                    for bucket in buckets
                ],
            )
            for app, buckets in history.items()
        ]
        return ConnectionUsage(window=window, apps=apps)

    async def _recent(self, namespace: str, query: RequestsQuery) -> Gathering:
        try:
            return await self.gatherer.recent(namespace, query)
        except Busy as busy:
            raise Refused(429, "too_many_requests", f"{busy}: try again in a second") from None


def limit_of(raw: str | None) -> int:
    """A ``limit`` query parameter: 1 to MAX_RECENT, 100 when absent."""
    if raw is None or raw == "":
        return 100
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_RECENT:
        raise Refused(400, "invalid_request", f"limit: a whole number from 1 to {MAX_RECENT}")
    return int(raw)


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


def _requests(found: Gathering) -> RecentRequests:
    return RecentRequests(
        items=[
            RecentRequestView(
                time=record.time,
                app=record.app.partition("/")[2],
                connection=record.connection.partition("/")[2],
                method=record.method,
                path=record.path,
                status=record.status,
                code=record.code,
                duration_ms=round(record.duration_ms, 3),
                request_bytes=record.request_bytes,
                response_bytes=record.response_bytes,
                replica=replica,
                trace_id=record.trace_id,
            )
            for replica, record in found.requests
        ],
        replicas_asked=found.asked,
        replicas_answered=found.answered,
    )
