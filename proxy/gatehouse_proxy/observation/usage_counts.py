"""The replica's usage counts: requests, errors, a latency histogram and the requests the
connection's cache answered, per (connection, app) and minute, kept until the operator takes them
(a Gather with ``usage``; every 10 s, and when someone opens a connection's usage).

What the operator took is forgotten here: the operator keeps the hour and the day. So a replica
holds only what was counted since it was last asked, at most ``most_rows`` rows (20,000; 7.4 MiB
measured, docs/operating/inspector-and-audit.md, "The inspector, usage and the audit trail"): past
that, a new (connection, app, minute) is not counted, and ``dropped`` says how many requests were
missed. That happens only while no operator asks (one of an earlier release, or none), or past
20,000 pairs busy in the same 10 s.
"""

from __future__ import annotations

from collections.abc import Iterator

from gatehouse_contract.activity import DURATION_BINS, UsageRow
from gatehouse_contract.routes import namespace_of

MOST_ROWS = 20_000

# A row's counts: errors, requests per latency bin, then those answered from the cache.
Counts = list[int]
Key = tuple[int, str, str]  # minute, connection, app


class UsageCounts:
    def __init__(self, most_rows: int = MOST_ROWS) -> None:
        self.most_rows = most_rows
        self._namespaces: dict[str, dict[Key, Counts]] = {}
        self.rows = 0
        self.dropped = 0

    def count(
        self,
        minute: int,
        connection: str,
        app: str,
        error: bool,
        duration_bin: int,
        *,
        cached: bool = False,
    ) -> None:
        namespace = namespace_of(app)
        rows = self._namespaces.get(namespace)
        if rows is None:
            rows = self._namespaces[namespace] = {}
        key = (minute, connection, app)
        counts = rows.get(key)
        if counts is None:
            if self.rows >= self.most_rows:
                self.dropped += 1
                return
            counts = rows[key] = [0] * (2 + DURATION_BINS)
            self.rows += 1
        if error:
            counts[0] += 1
        counts[1 + duration_bin] += 1
        if cached:
            counts[-1] += 1

    def take(self, namespace: str = "") -> list[tuple[Key, Counts]]:
        """Everything counted (of ``namespace``, or every one), which is forgotten here."""
        if namespace:
            taken = [self._namespaces.pop(namespace, {})]
        else:
            taken, self._namespaces = list(self._namespaces.values()), {}
        rows = [row for namespace_rows in taken for row in namespace_rows.items()]
        self.rows -= len(rows)
        return rows


def usage_rows(taken: list[tuple[Key, Counts]]) -> Iterator[UsageRow]:
    """Taken counts as the channel's rows, built without validation (the values are this
    module's own): 10,000 of them must not hold the event loop."""
    for (minute, connection, app), counts in taken:
        yield UsageRow.model_construct(
            minute=minute,
            connection=connection,
            app=app,
            errors=counts[0],
            durations=tuple(counts[1:-1]),
            cached=counts[-1],
        )
