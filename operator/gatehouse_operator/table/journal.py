"""The published routing table: versioned entries, and the recent deltas between versions.

Each flush takes the routes that changed in the store since the last one, serialises only those, and
records them as one delta with a new version (so a burst of changes is one delta). A replica that
is a few deltas behind receives them in order; one further behind, or new, receives a snapshot
built from the entries' JSON as it was serialised when they changed. Work and bytes per change
are those of the change, not of the whole table.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass

from gatehouse_contract.routes import AppRoute, ConnectionRoute, EntryKind, entry_digest
from gatehouse_operator.table.store import RouteStore

# A snapshot travels in parts of about this size, so no table size meets a message limit.
SNAPSHOT_PART_BYTES = 4 * 1024 * 1024
# Deltas kept for replicas that fall behind; one further behind gets a snapshot.
HISTORY_DELTAS = 1000
HISTORY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Entry:
    revision: int  # the version this entry last changed in
    route: ConnectionRoute | AppRoute
    data: bytes  # its JSON


@dataclass(frozen=True)
class Delta:
    base: int
    version: int
    payload: bytes
    changed: tuple[tuple[EntryKind, str], ...]


class Journal:
    def __init__(self) -> None:
        self.version = 0  # 0: nothing published yet
        self.entries: dict[tuple[EntryKind, str], Entry] = {}
        self.digest = 0
        self.history: deque[Delta] = deque()
        self._history_bytes = 0

    def revision(self, kind: EntryKind, key: str) -> int | None:
        entry = self.entries.get((kind, key))
        return entry.revision if entry else None

    def _next_version(self) -> int:
        # Milliseconds since the epoch, and always increasing: a restarted operator's versions
        # are newer than its predecessor's without any stored counter.
        return max(self.version + 1, int(time.time() * 1000))

    def flush(self, routes: RouteStore) -> Delta | None:
        """Publishes what changed in the store as one delta; None when nothing did."""
        upserts: list[tuple[EntryKind, str, ConnectionRoute | AppRoute]] = []
        removals: list[tuple[EntryKind, str]] = []
        for kind, key in sorted(routes.take_changes()):
            route = routes.route(kind, key)
            entry = self.entries.get((kind, key))
            if route is None:
                if entry is not None:
                    removals.append((kind, key))
            elif entry is None or entry.route != route:
                upserts.append((kind, key, route))
        if not upserts and not removals and self.version:
            return None
        base, version = self.version, self._next_version()
        for kind, key in removals:
            self.digest ^= entry_digest(kind, key, self.entries.pop((kind, key)).revision)
        parts: dict[EntryKind, list[bytes]] = {"connection": [], "app": []}
        for kind, key, route in upserts:
            previous = self.entries.get((kind, key))
            if previous is not None:
                self.digest ^= entry_digest(kind, key, previous.revision)
            # Fields at their defaults stay out: a field added in a release reaches a replica
            # of the release before only on the routes that use it.
            data = route.model_dump_json(exclude_defaults=True).encode()
            self.entries[kind, key] = Entry(version, route, data)
            self.digest ^= entry_digest(kind, key, version)
            parts[kind].append(data)
        payload = b"".join(
            (
                b'{"type":"delta","base":%d,"version":%d,"digest":"%x"'
                % (base, version, self.digest),
                b',"connections":[' + b",".join(parts["connection"]) + b"]",
                b',"apps":[' + b",".join(parts["app"]) + b"]",
                b',"removedConnections":'
                + json.dumps([key for kind, key in removals if kind == "connection"]).encode(),
                b',"removedApps":'
                + json.dumps([key for kind, key in removals if kind == "app"]).encode(),
                b"}",
            )
        )
        changed = (*removals, *((kind, key) for kind, key, _ in upserts))
        delta = Delta(base, version, payload, changed)
        self.version = version
        self._remember(delta)
        return delta

    def _remember(self, delta: Delta) -> None:
        self.history.append(delta)
        self._history_bytes += len(delta.payload)
        while len(self.history) > HISTORY_DELTAS or self._history_bytes > HISTORY_BYTES:
            self._history_bytes -= len(self.history.popleft().payload)

    def since(self, version: int) -> list[Delta] | None:
        """The deltas that take a replica from ``version`` to now; None when they are gone."""
        if version == self.version:
            return []
        deltas = list(self.history)
        for index, delta in enumerate(deltas):
            if delta.base == version:
                return deltas[index:]
        return None

    def move_past(self, version: int) -> None:
        """Continues the numbering after ``version``, which a replica holds from an operator
        whose clock ran ahead of this one's: the replica would refuse anything older. Every
        replica then needs a snapshot."""
        self.version = max(self.version, version + 1)
        self.history.clear()
        self._history_bytes = 0

    def snapshot(self) -> list[bytes]:
        """The whole table at the current version, in parts, from the entries' stored JSON."""
        groups: list[list[tuple[EntryKind, bytes]]] = [[]]
        size = 0
        for (kind, _), entry in self.entries.items():
            item = b'{"rev":%d,"route":%s}' % (entry.revision, entry.data)
            if size + len(item) > SNAPSHOT_PART_BYTES and groups[-1]:
                groups.append([])
                size = 0
            groups[-1].append((kind, item))
            size += len(item)
        head = b'{"type":"snapshot","version":%d,"digest":"%x"' % (self.version, self.digest)
        return [
            b"".join(
                (
                    head,
                    b',"part":%d,"parts":%d' % (number, len(groups)),
                    b',"connections":[',
                    b",".join(item for kind, item in group if kind == "connection"),
                    b'],"apps":[',
                    b",".join(item for kind, item in group if kind == "app"),
                    b"]}",
                )
            )
            for number, group in enumerate(groups)
        ]
