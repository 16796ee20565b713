"""The first table waits for the whole cluster.

A freshly started operator holds its first table back until it has seen every resource that
existed when it started (or a deadline passes), so a restart never publishes a partial table:
replicas would drop the routes it had not read yet.
"""

from __future__ import annotations

import time


class StartupGate:
    def __init__(self) -> None:
        self._pending: set[str] = set()
        self._deadline = 0.0

    def expect(self, keys: set[str], within: float) -> None:
        """Holds the first table back until these keys were seen, for at most ``within`` s."""
        self._pending = set(keys)
        self._deadline = time.monotonic() + within

    @property
    def open(self) -> bool:
        return not self._pending or time.monotonic() > self._deadline

    def seen(self, key: str) -> None:
        self._pending.discard(key)
