"""The proxy replicas the operator knows, and the table version each has installed.

A replica counts once it has acknowledged a table (before that it is not ready and serves
nothing). One whose stream broke still serves its last table, so it keeps counting for a grace
period, during which changes it has not installed are reported as pending; one that said goodbye
(a Pod shutting down) stops counting at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Replica:
    name: str
    connected: bool = True
    version: int = 0  # the version it last acknowledged; 0: none yet
    connected_at: float = 0.0
    disconnected_at: float = 0.0
    last_refusal: str = ""


class Replicas:
    def __init__(self, grace_seconds: float, on_change: Callable[[], None]) -> None:
        self.grace_seconds = grace_seconds
        self.on_change = on_change
        self.by_name: dict[str, Replica] = {}

    def connected(self, name: str) -> Replica:
        replica = Replica(name, connected_at=time.monotonic())
        self.by_name[name] = replica
        self.on_change()
        return replica

    def acknowledged(self, replica: Replica, version: int) -> None:
        if version != replica.version:
            replica.version = version
            self.on_change()

    def disconnected(self, replica: Replica, *, goodbye: bool) -> None:
        if self.by_name.get(replica.name) is not replica:
            return  # a newer stream of the same replica replaced it
        if goodbye or not replica.version:
            del self.by_name[replica.name]
        else:
            replica.connected = False
            replica.disconnected_at = time.monotonic()
        self.on_change()

    def serving(self) -> list[Replica]:
        """Replicas that serve a table: acknowledged one, and connected or recently so."""
        now = time.monotonic()
        expired = [
            name
            for name, replica in self.by_name.items()
            if not replica.connected and now - replica.disconnected_at > self.grace_seconds
        ]
        for name in expired:
            del self.by_name[name]
        if expired:
            self.on_change()
        return [replica for replica in self.by_name.values() if replica.version]

    def floor(self) -> tuple[int, int]:
        """(the lowest version every serving replica holds, how many serve); (0, 0) if none."""
        serving = self.serving()
        return (min(r.version for r in serving), len(serving)) if serving else (0, 0)

    def holding(self, revision: int) -> int:
        return sum(1 for replica in self.serving() if replica.version >= revision)
