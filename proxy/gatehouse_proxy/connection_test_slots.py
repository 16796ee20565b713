"""Which connection tests a replica runs now, which wait, and which it turns away.

Tests arrive from the operator for every namespace on one channel. Run in one shared pool, one
tenant's two dozen tests against a slow upstream held every place, and another tenant's instant
test waited past the operator's patience; tests still queued when the operator had given up ran
anyway, later, for nobody. So places are per namespace (a tenant) under a total per replica, a
namespace's queue is bounded (past it a test is turned away at once, and the operator tries it
again later), and each test carries the operator's deadline: one that has not started by then is
dropped, one still running then is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from gatehouse_proxy.errors import ProxyError

# Tests of one namespace running at once on a replica, and waiting behind them.
RUNNING_PER_NAMESPACE = 4
WAITING_PER_NAMESPACE = 16
# Tests of all namespaces running at once on a replica.
RUNNING_PER_REPLICA = 16


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
    async def slot(self, namespace: str, deadline: float) -> AsyncIterator[None]:
        """A place for one test of ``namespace`` until ``deadline`` (the loop's clock).

        Raises ProxyError ``tests_busy`` when the namespace's queue is full, and
        ``test_expired`` when the deadline passes before or while the test runs.
        """
        admitted = self._admitted.get(namespace, 0)
        if admitted >= self.per_namespace + self.waiting_per_namespace:
            raise ProxyError(
                "tests_busy",
                f"namespace {namespace} has {admitted} connection tests running or waiting on "
                "this proxy replica; try again when they are done",
            )
        own = self._namespaces.setdefault(namespace, asyncio.Semaphore(self.per_namespace))
        self._admitted[namespace] = admitted + 1
        timeout = asyncio.timeout_at(deadline)
        try:
            async with timeout, own, self.replica:
                yield
        except TimeoutError:
            if not timeout.expired():
                raise
            raise ProxyError("test_expired", "the operator stopped waiting for this test") from None
        finally:
            left = self._admitted[namespace] - 1
            if left:
                self._admitted[namespace] = left
            else:
                del self._admitted[namespace]
                del self._namespaces[namespace]
