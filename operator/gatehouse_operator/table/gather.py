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
among the table's. The usage of every namespace is collected every ``USAGE_SECONDS`` by the
operator itself, outside those bounds.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gatehouse_contract.activity import RecentRequest, RequestsQuery
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

    async def recent(self, namespace: str, query: RequestsQuery) -> Gathering:
        """The newest records ``query`` asks for, from every replica, newest first and at most
        ``query.limit`` of them."""
        with self._slot(namespace):
            return await self._gather(query, usage_of=None)

    async def usage(self, namespace: str) -> Gathering:
        """Takes the namespace's usage from every replica now, into the history."""
        with self._slot(namespace):
            return await self._gather(None, usage_of=namespace)

    async def collect_usage(self) -> None:
        """Takes every namespace's usage from every replica (the periodic collection)."""
        await self._gather(None, usage_of="")

    async def _gather(self, query: RequestsQuery | None, usage_of: str | None) -> Gathering:
        sessions = list(self.channel.sessions.values())
        asked = [session for session in sessions if session.activity]
        frame = Gather(
            id=secrets.token_hex(8),
            requests=query,
            usage=usage_of is not None,
            usage_namespace=usage_of or "",
        )
        answers: list[Gathered | BaseException] = []
        if asked:
            calls = [asyncio.ensure_future(session.gather(frame)) for session in asked]
            done, pending = await asyncio.wait(calls, timeout=GATHER_SECONDS)
            for call in pending:
                call.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            answers = [
                call.exception() or call.result() if call in done else TimeoutError()
                for call in calls
            ]
        found = [
            (session.replica.name, record)
            for session, answer in zip(asked, answers, strict=True)
            if isinstance(answer, Gathered)
            for record in answer.requests
        ]
        found.sort(key=lambda pair: pair[1].time, reverse=True)
        return Gathering(
            requests=found[: query.limit] if query else [],
            asked=len(asked),
            answered=sum(isinstance(answer, Gathered) for answer in answers),
            unable=len(sessions) - len(asked),
        )
