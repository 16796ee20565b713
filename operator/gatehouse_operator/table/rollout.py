"""``Ready`` for connections and apps: routed by every serving proxy replica, not merely published.

A resource whose own checks pass is handed here with its status. It is written ``Ready=True``
once every serving replica acknowledged a table that holds its latest route; if that takes longer
than ``REPORT_AFTER_SECONDS`` it is written ``Ready=False`` with the reason ``PendingProxies``
("installed on 1 of 2 proxy replicas") or ``NoProxyReplicas``, and then ``Ready=True`` when the
replicas catch up. In the common case (acknowledged within the grace) that is one status write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from gatehouse_contract.routes import EntryKind
from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.meta import Kind, Status
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.kube import failure
from gatehouse_operator.kube.errors import Forbidden
from gatehouse_operator.status import Verdict
from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replicas
from gatehouse_operator.table.store import RouteStore

log = logging.getLogger("gatehouse.operator.rollout")

REPORT_AFTER_SECONDS = 2.0
# Status writes the rollout makes at once (a bulk apply finishes thousands together).
CONCURRENT_WRITES = 16


@dataclass
class Routed:
    """A resource waiting for the replicas: everything its status needs but ``Ready``."""

    kind: Kind
    resource: Resource
    verdicts: Sequence[Verdict]
    extra: Status  # the kind's own status fields
    key: str
    entry: tuple[EntryKind, str]
    message: str  # Ready's message once routed
    report_at: float = field(default_factory=lambda: time.monotonic() + REPORT_AFTER_SECONDS)
    reported: tuple[str, str] = ("", "")
    not_before: float = 0.0  # after a failed write


WriteStatus = Callable[[Kind, Resource, Sequence[Verdict], Status, str], Awaitable[None]]


class Rollout:
    def __init__(
        self, routes: RouteStore, journal: Journal, replicas: Replicas, write: WriteStatus
    ) -> None:
        self.routes = routes
        self.journal = journal
        self.replicas = replicas
        self.write = write
        self.waiting: dict[str, Routed] = {}
        self._wake = asyncio.Event()
        self._failures: set[str] = set()

    def verdict(self, routed: Routed, replicas: tuple[int, int] | None = None) -> Verdict:
        """Ready for ``routed`` now; ``replicas`` is replicas.floor(), when the caller has it."""
        revision = self.journal.revision(*routed.entry)
        floor, serving = replicas or self.replicas.floor()
        if serving == 0:
            return Verdict(
                ConditionType.READY,
                "False",
                Reason.NO_PROXY_REPLICAS,
                "no proxy replica is connected to the operator",
            )
        if (
            revision is not None
            and not self.routes.unpublished(*routed.entry)
            and revision <= floor
        ):
            return Verdict(ConditionType.READY, "True", Reason.ROUTED, routed.message)
        holding = 0 if revision is None else self.replicas.holding(revision)
        return Verdict(
            ConditionType.READY,
            "False",
            Reason.PENDING_PROXIES,
            f"installed on {holding} of {serving} proxy replicas",
        )

    async def report(self, routed: Routed) -> None:
        """Writes the status of a resource whose own checks pass: Ready at once if the replicas
        hold its route already, else once they do (or PendingProxies, if that takes long)."""
        verdict = self.verdict(routed)
        if verdict.ok:
            self.drop(routed.key)
            await self.write(
                routed.kind, routed.resource, [*routed.verdicts, verdict], routed.extra, routed.key
            )
        else:
            self.expect(routed)

    async def report_not_ready(
        self,
        kind: Kind,
        resource: Resource,
        verdicts: Sequence[Verdict],
        extra: Status,
        key: str,
    ) -> None:
        """Writes the status of a resource whose own checks fail: nothing to wait for."""
        self.drop(key)
        await self.write(kind, resource, verdicts, extra, key)

    def expect(self, routed: Routed) -> None:
        self.waiting[routed.key] = routed
        self.wake()

    def drop(self, key: str) -> None:
        self.waiting.pop(key, None)

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Writes statuses as replicas catch up, until cancelled."""
        slots = asyncio.Semaphore(CONCURRENT_WRITES)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=0.5)
            self._wake.clear()
            now = time.monotonic()
            floor = self.replicas.floor()
            due: list[tuple[Routed, Verdict]] = []
            for routed in list(self.waiting.values()):
                if routed.not_before > now:
                    continue
                verdict = self.verdict(routed, floor)
                if verdict.ok:
                    del self.waiting[routed.key]
                    due.append((routed, verdict))
                elif now >= routed.report_at and routed.reported != (
                    verdict.reason,
                    verdict.message,
                ):
                    routed.reported = (verdict.reason, verdict.message)
                    due.append((routed, verdict))
            await asyncio.gather(*(self._write(routed, verdict, slots) for routed, verdict in due))
            # Batches, rather than one pass per acknowledgement.
            await asyncio.sleep(0.1)

    async def _write(self, routed: Routed, verdict: Verdict, slots: asyncio.Semaphore) -> None:
        async with slots:
            try:
                await self.write(
                    routed.kind,
                    routed.resource,
                    [*routed.verdicts, verdict],
                    routed.extra,
                    routed.key,
                )
            except Exception as error:  # any: the rollout must outlive one failed write
                if routed.key not in self._failures:
                    log.error(
                        "cannot write the status of %s (%s); retrying", routed.key, _cause(error)
                    )
                self._failures.add(routed.key)
                routed.not_before = time.monotonic() + 5.0
                routed.reported = ("", "")
                self.waiting.setdefault(routed.key, routed)  # tried again
            else:
                self._failures.discard(routed.key)


def _cause(error: Exception) -> str:
    """Why a status write failed, in words for an operator's log: never the response's
    headers and body."""
    if isinstance(error, Forbidden):
        return "HTTP 403: the operator's ServiceAccount lacks patch on the kind's /status"
    return failure(error)
