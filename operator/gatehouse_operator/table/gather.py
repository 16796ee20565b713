"""Asking the proxy replicas what apps did: their recent requests, and the usage they counted.

The leader sends a ``Gather`` frame on the table channel to every replica that said it answers
them (``ACTIVITY_FEATURE``; a replica of an earlier release is not asked, and counted as
``unable``), waits for all of them together at most ``GATHER_SECONDS``, and merges what came in
time: a replica that is slow or gone leaves the answer partial (``answered`` < ``asked``), never
late. Usage rows a replica sends are added to the channel's ``UsageHistory`` as they arrive.

The channel carries every tenant's tables, so one tenant's questions are bounded: at most
``PER_NAMESPACE`` gathers of one namespace and ``TOTAL`` of all are in flight at once, and one
more is refused (``Busy``) rather than queued. A gather asks a replica for at most
``MAX_RECENT`` records of one connection or app, about 150 KB; its frame is a few hundred bytes
among the table's.

A follower (``gatehouse requests -f``) holds a position per replica (``Position``): each replica
that reads them (``CURSOR_FEATURE``) is asked for its records after its own, and says where it
then stands and how many past it it no longer held; a replica the follower has no position of is
asked from its first record. Those pages are not cut to ``limit`` across replicas (each gave at
most ``limit``), so that every record is given once; a replica of an earlier release is not asked
for them. The usage of every namespace is collected every ``USAGE_SECONDS`` by the
operator itself, outside those bounds.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from gatehouse_contract.activity import START, Position, RecentRequest, RequestsQuery
from gatehouse_contract.frames import Gather, Gathered
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.table.channel import TableChannel

GATHER_SECONDS = 2.0
PER_NAMESPACE = 2
TOTAL = 8
USAGE_SECONDS = 10.0


class Busy(GatehouseError):
    """Too many gathers in flight: of this namespace, or of all."""


@dataclass(frozen=True)
class Gathering:
    requests: list[tuple[str, RecentRequest]]  # (replica, record), newest first
    asked: int  # replicas asked
    answered: int  # of those, answered in time
    unable: int  # connected replicas of an earlier release, which cannot be asked
    # Where the records stand, by replica, after these (replicas that read cursors).
    positions: dict[str, Position] = field(default_factory=dict)
    lost: int = 0  # records past a follower's positions the replicas no longer held


class Gatherer:
    def __init__(self, channel: TableChannel) -> None:
        self.channel = channel
        self._namespaces: Counter[str] = Counter()

    @contextmanager
    def _slot(self, namespace: str) -> Iterator[None]:
        if self._namespaces[namespace] >= PER_NAMESPACE:
            raise Busy(f"{PER_NAMESPACE} gathers of namespace {namespace} are running")
        if self._namespaces.total() >= TOTAL:
            raise Busy(f"{TOTAL} gathers are running")
        self._namespaces[namespace] += 1
        try:
            yield
        finally:
            self._namespaces[namespace] -= 1
            if not self._namespaces[namespace]:
                del self._namespaces[namespace]

    async def recent(
        self, namespace: str, query: RequestsQuery, after: Mapping[str, Position] | None = None
    ) -> Gathering:
        """The newest records ``query`` asks for, from every replica, newest first and at most
        ``query.limit`` of them; or, ``after`` a follower's positions, each replica's next ones
        (at most ``query.limit`` of each), newest first."""
        with self._slot(namespace):
            return await self._gather(query, usage_of=None, after=after)

    async def usage(self, namespace: str) -> Gathering:
        """Takes the namespace's usage from every replica now, into the history."""
        with self._slot(namespace):
            return await self._gather(None, usage_of=namespace)

    async def collect_usage(self) -> None:
        """Takes every namespace's usage from every replica (the periodic collection)."""
        await self._gather(None, usage_of="")

    async def _gather(
        self,
        query: RequestsQuery | None,
        usage_of: str | None,
        after: Mapping[str, Position] | None = None,
    ) -> Gathering:
        sessions = list(self.channel.sessions.values())
        following = after is not None
        asked = [s for s in sessions if s.activity and (s.cursor or not following)]
        gather_id = secrets.token_hex(8)

        def frame(replica: str, cursor: bool) -> Gather:
            requests = query
            if query is not None and cursor:
                where = None if after is None else after.get(replica, START)
                requests = query.model_copy(update={"cursor": True, "after": where})
            return Gather(
                id=gather_id,
                requests=requests,
                usage=usage_of is not None,
                usage_namespace=usage_of or "",
            )

        answers: list[Gathered | BaseException] = []
        if asked:
            calls = [
                asyncio.ensure_future(session.gather(frame(session.replica.name, session.cursor)))
                for session in asked
            ]
            done, pending = await asyncio.wait(calls, timeout=GATHER_SECONDS)
            for call in pending:
                call.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            answers = [
                call.exception() or call.result() if call in done else TimeoutError()
                for call in calls
            ]
        gathered = [
            (session.replica.name, answer)
            for session, answer in zip(asked, answers, strict=True)
            if isinstance(answer, Gathered)
        ]
        found = [(name, record) for name, answer in gathered for record in answer.requests]
        found.sort(key=lambda pair: pair[1].time, reverse=True)
        return Gathering(
            requests=found if following or not query else found[: query.limit],
            asked=len(asked),
            answered=len(gathered),
            unable=len(sessions) - len(asked),
            positions={name: answer.position for name, answer in gathered if answer.position},
            lost=sum(answer.lost for _, answer in gathered),
        )
