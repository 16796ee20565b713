"""What a replica keeps of each fetch, and how it answers the operator's questions about them.

What it keeps: the inspector's records (``recent_requests``), the usage charts' counts
(``usage_counts``) and the audit trail (``audit``), each filled by its observer (``observers``)
once per fetch an app's token identified.

``answer`` serves a ``Gather`` frame from the operator: the usage counted since the last one,
in parts the event loop is given back between, then the recent requests asked for: the newest,
or a follower's next ones after its position, with where the records stand when the query asks
(``cursor``, from an operator that reads it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from gatehouse_contract.activity import MAX_USAGE_ROWS, RecentRequest
from gatehouse_contract.frames import POSITION_FIELDS, Gather, Gathered, UsageReport
from gatehouse_proxy.observation.audit import AuditSettings, AuditTrail
from gatehouse_proxy.observation.recent_requests import RecentRequests, Record
from gatehouse_proxy.observation.usage_counts import UsageCounts, usage_rows


class Activity:
    def __init__(self, replica: str, audit: AuditSettings | None = None) -> None:
        self.recent = RecentRequests()
        self.usage = UsageCounts()
        self.audit = AuditTrail(audit or AuditSettings(), replica)

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
        query = gather.requests
        if query is None or not query.cursor:
            found = self.recent.recent(query) if query is not None else []
            answer = Gathered(id=gather.id, requests=_sent(found))
            await send(answer.model_dump_json(exclude=POSITION_FIELDS))
        elif query.after is None:
            found = self.recent.recent(query)
            position = self.recent.position(query)
            await send(
                Gathered(id=gather.id, requests=_sent(found), position=position).model_dump_json()
            )
        else:
            page = self.recent.after(query, query.after)
            answer = Gathered(
                id=gather.id, requests=_sent(page.records), position=page.position, lost=page.lost
            )
            await send(answer.model_dump_json())


def _sent(records: list[Record]) -> tuple[RecentRequest, ...]:
    return tuple(RecentRequest.model_construct(**record._asdict()) for record in records)
