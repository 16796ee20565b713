"""What the inspector and the usage counters hold in memory at 10,000 connections, on a proxy
replica and on the operator, and what recording one fetch costs the replica.

In this process, no stack: the replica's ``Activity`` and the operator's ``UsageHistory`` are
filled as traffic and reports would fill them, and ``tracemalloc`` counts what they hold.

- replica, inspector: 10,000 connections in 100 namespaces, one app each, fetches spread over
  them until every bound is reached; then one namespace alone floods the replica (its records
  push only the oldest out, and leave taken ones in the total's queue until it is rebuilt): the
  most held at any point. Paths are the longest kept (256 characters), the worst case.
- replica, usage counts: 20,000 rows (its bound), 10,000 connections over two minutes.
- operator, usage history: 10,000 (connection, app) pairs, and at its bound, 20,000.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable

from gatehouse_contract.activity import DURATION_BINS, UsageRow
from gatehouse_operator.table.usage import MOST_PAIRS, UsageHistory
from gatehouse_proxy.observation.activity import Activity
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.observation.observers import Audit, Inspector, Observer, Usage
from gatehouse_proxy.observation.recent_requests import TOTAL
from gatehouse_proxy.observation.usage_counts import MOST_ROWS

CONNECTIONS = 10_000
NAMESPACES = 100
PATH = b"/" + b"p" * 255
QUERY = b"page=2&cursor=abcdef"
RECORD_CALLS = 100_000


def _held(fill: Callable[[], object]) -> float:
    """The most MiB allocated while ``fill`` builds (what it holds at its fullest, and the
    garbage of the way there)."""
    gc.collect()
    tracemalloc.start()
    fill()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def _recorder(activity: Activity) -> Callable[[str, str, bytes], None]:
    """Records a fetch of ``path`` as the door does: a finished Fetch given to the activity's
    observers (the inspector's, the usage's, the audit's)."""
    observers: tuple[Observer, ...] = (
        Inspector(activity.recent),
        Usage(activity.usage),
        Audit(activity.audit),
    )

    def record(app: str, connection: str, path: bytes) -> None:
        fetch = Fetch("GET", path, QUERY, None, 0.0, app=app, connection=connection)
        fetch.status, fetch.sent, fetch.finished, fetch.ended_at = 200, 100, 0.01, time.time()
        for observer in observers:
            observer.observe(fetch)

    return record


def _connection(index: int) -> tuple[str, str]:
    namespace = f"ns-{index % NAMESPACES}"
    return f"{namespace}/DataApp/app-{index}", f"{namespace}/conn-{index}"


def inspector() -> float:
    def fill() -> object:
        activity = Activity("bench")
        activity.usage.most_rows = 0  # the inspector alone: usage is measured below
        record = _recorder(activity)
        for turn in range(3 * TOTAL):
            app, connection = _connection(turn % CONNECTIONS)
            record(app, connection, PATH)
        for _ in range(2 * TOTAL):  # one namespace floods
            app, connection = _connection(0)
            record(app, connection, PATH)
        return activity

    return _held(fill)


def usage_counts() -> float:
    def fill() -> object:
        activity = Activity("bench")
        for minute in range(MOST_ROWS // CONNECTIONS):
            for index in range(CONNECTIONS):
                app, connection = _connection(index)
                activity.usage.count(minute, connection, app, False, 2)
        return activity.usage

    return _held(fill)


def usage_history(pairs: int) -> float:
    durations = (1,) * DURATION_BINS
    now = time.time()
    minute = int(now // 60)

    def fill() -> object:
        history = UsageHistory()
        for index in range(pairs):
            app, connection = _connection(index)
            history.add(
                [
                    UsageRow.model_construct(
                        minute=minute,
                        connection=connection,
                        app=app,
                        errors=0,
                        durations=durations,
                    )
                ]
            )
        return history

    return _held(fill)


def record_cost_us() -> float:
    record = _recorder(Activity("bench"))
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for turn in range(RECORD_CALLS):
            app, connection = _connection(turn % CONNECTIONS)
            record(app, connection, b"/v1/items")
        best = min(best, (time.perf_counter() - started) / RECORD_CALLS * 1e6)
    return best


def table() -> str:
    rows = [
        (
            "Proxy replica",
            f"inspector ({TOTAL:,} records kept, 256-character paths)",
            f"{inspector():.1f} MiB",
        ),
        (
            "Proxy replica",
            f"usage counts ({MOST_ROWS:,} rows, its bound)",
            f"{usage_counts():.1f} MiB",
        ),
        (
            "Operator",
            f"usage history ({CONNECTIONS:,} pairs)",
            f"{usage_history(CONNECTIONS):.1f} MiB",
        ),
        (
            "Operator",
            f"usage history ({MOST_PAIRS:,} pairs, its bound)",
            f"{usage_history(MOST_PAIRS):.1f} MiB",
        ),
        (
            "Proxy replica",
            "recording one fetch (record + count, audit off)",
            f"{record_cost_us():.1f} µs",
        ),
    ]
    lines = ["| Where | What, at 10,000 connections | Held |", "| --- | --- | ---: |"]
    lines += [f"| {where} | {what} | {held} |" for where, what, held in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
