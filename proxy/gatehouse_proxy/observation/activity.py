"""What a replica keeps of each fetch, and how it answers the operator's questions about them.

``record`` is called once per fetch an app's token identified, when its answer has ended (or it
was refused): one record for the inspector (``recent_requests``), one count for the usage charts
(``usage_counts``, when a connection was found) and, when the installation asks, one audit line
(``audit``). It is on every request's path, so it does a few microseconds of work and no I/O but
the audit line (docs/operating/inspector-and-audit.md, "The inspector, usage and the audit
trail", has the cost measured).

``answer`` serves a ``Gather`` frame from the operator: the usage counted since the last one,
in parts the event loop is given back between, then the recent requests asked for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from gatehouse_contract.activity import MAX_USAGE_ROWS, RecentRequest, duration_bin, is_error
from gatehouse_contract.frames import Gather, Gathered, UsageReport
from gatehouse_contract.routes import namespace_of
from gatehouse_proxy.observation.audit import AuditSettings, AuditTrail
from gatehouse_proxy.observation.recent_requests import RecentRequests, Record, scrubbed_path
from gatehouse_proxy.observation.trace_ids import trace_id
from gatehouse_proxy.observation.usage_counts import UsageCounts, usage_rows


class Activity:
    def __init__(self, replica: str, audit: AuditSettings | None = None) -> None:
        self.recent = RecentRequests()
        self.usage = UsageCounts()
        self.audit = AuditTrail(audit or AuditSettings(), replica)
        self._seq = 0

    def record(
        self,
        app: str,
        connection: str,
        method: str,
        raw_path: bytes,
        query: bytes,
        status: int,
        code: str,
        seconds: float,
        request_bytes: int,
        response_bytes: int,
        traceparent: str | None,
        traced: str = "",
    ) -> None:
        """One fetch: ``app`` and ``connection`` are routing keys (``connection`` empty when the
        alias named none), ``raw_path`` the path under the alias as sent, ``seconds`` from its
        arrival to the end of its answer, ``traced`` the trace id tracing gave it (the same as
        the exported trace's), else the app's ``traceparent``'s or a new one."""
        now = time.time()
        self._seq += 1
        milliseconds = seconds * 1000
        namespace = namespace_of(app)
        # tuple.__new__: half of what Record(...) costs, with the same names.
        record = tuple.__new__(
            Record,
            (
                self._seq,
                now,
                app,
                connection,
                method,
                scrubbed_path(raw_path, query),
                status,
                code,
                milliseconds,
                request_bytes,
                response_bytes,
                traced or trace_id(traceparent),
            ),
        )
        self.recent.add(record, namespace)
        if connection:
            self.usage.count(
                namespace,
                int(now // 60),
                connection,
                app,
                is_error(status),
                duration_bin(milliseconds),
            )
        self.audit.write(record)

    async def answer(self, gather: Gather, send: Callable[[str], Awaitable[None]]) -> None:
        if gather.usage:
            taken = self.usage.take(gather.usage_namespace)
            for start in range(0, len(taken), MAX_USAGE_ROWS):
                # Each part's rows are built in its own turn: 20,000 built at once held the
                # loop ~0.1 s before the first part went.
                rows = tuple(usage_rows(taken[start : start + MAX_USAGE_ROWS]))
                part = UsageReport(id=gather.id, rows=rows)
                await send(part.model_dump_json())
                await asyncio.sleep(0)  # 1,000 rows at a time, then the other tenants
        found: tuple[RecentRequest, ...] = ()
        if gather.requests is not None:
            found = tuple(
                RecentRequest.model_construct(**record._asdict())
                for record in self.recent.recent(gather.requests)
            )
        await send(Gathered(id=gather.id, requests=found).model_dump_json())
