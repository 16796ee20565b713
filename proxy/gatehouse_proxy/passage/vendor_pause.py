"""Heeding the vendor's pause: a 429 or 503 with Retry-After pauses, for the fleet, the endpoint
it came on, or the whole connection when the connection says it is the credential's limit
(gatehouse_proxy.limits.vendor_pauses): every replica calling on would burn the quota of every
app on it. The operator is told of a new pause (a ``Throttled`` frame, an Event)."""

from __future__ import annotations

from gatehouse_contract.frames import MAX_ENDPOINT_CHARS, Throttled
from gatehouse_contract.routes import ConnectionRoute
from gatehouse_proxy.http.retry_after import requested_pause
from gatehouse_proxy.limits.quotas import Quotas
from gatehouse_proxy.limits.vendor_pauses import PAUSING_STATUSES, is_credential_limit
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.rules.matcher import UpstreamPath
from gatehouse_proxy.table.feed import TableFeed
from gatehouse_proxy.upstream.forwarder import Upstream


class VendorPause:
    def __init__(self, quotas: Quotas, feed: TableFeed) -> None:
        self.quotas = quotas
        self.feed = feed

    async def heed(
        self, fetch: Fetch, connection: ConnectionRoute, path: UpstreamPath, upstream: Upstream
    ) -> None:
        if upstream.status not in PAUSING_STATUSES:
            return
        answered = upstream.response.headers
        seconds = requested_pause(answered.getall("retry-after", []))
        if not seconds:
            return
        endpoint = fetch.endpoint
        limit = connection.limits.credential_limit
        whole = is_credential_limit(limit, path, upstream.status, answered)
        scope = await self.quotas.pause(connection, seconds, "" if whole else endpoint)
        if scope is not None:
            await self.feed.tell(
                Throttled(
                    connection=connection.key,
                    status=upstream.status,
                    seconds=seconds,
                    scope=scope,
                    endpoint=endpoint[:MAX_ENDPOINT_CHARS],
                )
            )
