"""Which connection tests a replica runs now, which wait, and which it turns away.

Tests arrive from the operator for every namespace on one channel. Run in one shared pool, one
tenant's two dozen tests against a slow upstream held every place, and another tenant's instant
test waited past the operator's patience; tests still queued when the operator had given up ran
anyway, later, for nobody. So places are per namespace (a tenant) under a total per replica, a
namespace's queue is bounded (past it a test is turned away at once, and the operator tries it
again later), and each test carries the operator's deadline.

A test's request reaches the upstream at most once, so what happens at the deadline depends on
whether it was sent: a test that has not started by the last moment its connection's timeout
fits before the deadline is dropped unsent (the operator sends it again), and one whose request
was sent and is still running at the deadline is cancelled, which is its result.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from gatehouse_contract.connection_tests import TEST_NOT_STARTED, TEST_TIMED_OUT, TESTS_BUSY
from gatehouse_proxy.errors import ProxyError

# Tests of one namespace running at once on a replica, and waiting behind them.
RUNNING_PER_NAMESPACE = 4
WAITING_PER_NAMESPACE = 16
# Tests of all namespaces running at once on a replica.
RUNNING_PER_REPLICA = 16


@dataclass
class ConnectionTestRun:
    """One test on this replica: when it must start and end (the loop's clock), and how far it
    got."""

    start_by: float
    deadline: float
    started: bool = False  # it holds its place
    sent: bool = False  # its request went upstream

    def sending(self) -> None:
        """Called just before the request goes upstream: from then on it is not sent again."""
        self.sent = True


class ConnectionTestSlots:
    def __init__(
        self,
        per_namespace: int = RUNNING_PER_NAMESPACE,
        waiting_per_namespace: int = WAITING_PER_NAMESPACE,
        per_replica: int = RUNNING_PER_REPLICA,
    ) -> None:
        self.per_namespace = per_namespace
        self.waiting_per_namespace = waiting_per_namespace
        self.replica = asyncio.Semaphore(per_replica)
        self._namespaces: dict[str, asyncio.Semaphore] = {}
        self._admitted: dict[str, int] = {}  # running or waiting, per namespace

    @contextlib.asynccontextmanager
    async def slot(self, namespace: str, run: ConnectionTestRun) -> AsyncIterator[None]:
        """A place for ``run``, a test of ``namespace``, taken by ``run.start_by`` and held
        until ``run.deadline`` at most.

        Raises ProxyError ``tests_busy`` when the namespace's queue is full, ``test_not_started``
        when no place came in time or the deadline passed before the request was sent, and
        ``test_timed_out`` when it passed after.
        """
        admitted = self._admitted.get(namespace, 0)
        if admitted >= self.per_namespace + self.waiting_per_namespace:
            raise ProxyError(
                TESTS_BUSY,
                f"namespace {namespace} has {admitted} connection tests running or waiting on "
                "this proxy replica; try again when they are done",
            )
        own = self._namespaces.setdefault(namespace, asyncio.Semaphore(self.per_namespace))
        self._admitted[namespace] = admitted + 1
        timeout = asyncio.timeout_at(run.start_by)
        try:
            async with timeout, own, self.replica:
                run.started = True
                timeout.reschedule(run.deadline)
                yield
        except TimeoutError:
            if not timeout.expired():
                raise
            if run.sent:
                raise ProxyError(
                    TEST_TIMED_OUT,
                    "the upstream did not answer before the test's deadline; the request was "
                    "sent once and is not sent again",
                ) from None
            why = (
                "its deadline passed before its request was sent"
                if run.started
                else "the namespace's earlier tests held this replica's places until it had to "
                "start"
            )
            raise ProxyError(TEST_NOT_STARTED, f"{why}; it was not sent") from None
        finally:
            left = self._admitted[namespace] - 1
            if left:
                self._admitted[namespace] = left
            else:
                del self._admitted[namespace]
                del self._namespaces[namespace]
