"""A replica's routing table: the operator's entries, installed from a snapshot and deltas.

Each replica keeps one :class:`RoutingTable` (see :mod:`gatehouse_proxy.table.feed`) and routes
by it. The entries' shapes are the contract's (:mod:`gatehouse_contract.routes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gatehouse_contract.frames import Delta, Snapshot
from gatehouse_contract.routes import (
    AppRoute,
    ConnectionRoute,
    EntryKind,
    entry_digest,
    token_sha256,
)
from gatehouse_proxy.errors import ProxyException


class TableRejected(ProxyException, ValueError):
    """A snapshot or delta the replica will not install; its table stays as it was."""


class TableGap(ProxyException, ValueError):
    """A delta that does not continue the replica's table: it needs a snapshot."""


@dataclass(frozen=True)
class RoutingTable:
    """A replica's table: routes by key, each with the version it last changed in.

    Immutable: a delta makes a new table (dictionary copies, no re-validation of what did not
    change), so a request always sees one consistent table.
    """

    version: int
    connections: Mapping[str, ConnectionRoute]
    apps: Mapping[str, AppRoute]
    revisions: Mapping[tuple[EntryKind, str], int]
    digest: int
    key_id: str = ""
    apps_by_token_hash: Mapping[str, AppRoute] = field(default_factory=dict)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, key_id: str) -> RoutingTable:
        """Builds a table from a whole snapshot; TableRejected says why one cannot be."""
        connections = {entry.route.key: entry.route for entry in snapshot.connections}
        apps = {entry.route.key: entry.route for entry in snapshot.apps}
        revisions: dict[tuple[EntryKind, str], int] = {
            **{("connection", entry.route.key): entry.rev for entry in snapshot.connections},
            **{("app", entry.route.key): entry.rev for entry in snapshot.apps},
        }
        digest = 0
        for (kind, key), revision in revisions.items():
            digest ^= entry_digest(kind, key, revision)
        if digest != int(snapshot.digest, 16):
            raise TableRejected(f"snapshot {snapshot.version} does not match its digest")
        return cls._made(snapshot.version, connections, apps, revisions, digest, key_id)

    def with_delta(self, delta: Delta, key_id: str) -> RoutingTable:
        """This table with a delta applied; TableGap when the delta does not follow it."""
        base, version = delta.base, delta.version
        if version <= self.version:
            raise TableRejected(f"delta to {version} is not newer than {self.version} (a replay?)")
        if base != self.version:
            raise TableGap(f"a delta from {base} arrived, the table is at {self.version}")
        connections = dict(self.connections)
        apps = dict(self.apps)
        revisions = dict(self.revisions)
        digest = self.digest
        changes: list[tuple[EntryKind, str, ConnectionRoute | AppRoute | None]] = [
            *(("connection", key, None) for key in delta.removed_connections),
            *(("app", key, None) for key in delta.removed_apps),
            *(("connection", route.key, route) for route in delta.connections),
            *(("app", app.key, app) for app in delta.apps),
        ]
        for kind, key, route in changes:
            previous = revisions.pop((kind, key), None)
            if previous is not None:
                digest ^= entry_digest(kind, key, previous)
            routes: dict[str, Any] = connections if kind == "connection" else apps
            if route is None:
                routes.pop(key, None)
                continue
            routes[key] = route
            revisions[kind, key] = version
            digest ^= entry_digest(kind, key, version)
        if digest != int(delta.digest, 16):
            raise TableGap(f"the table after the delta to {version} does not match its digest")
        return self._made(version, connections, apps, revisions, digest, key_id)

    @classmethod
    def _made(
        cls,
        version: int,
        connections: dict[str, ConnectionRoute],
        apps: dict[str, AppRoute],
        revisions: dict[tuple[EntryKind, str], int],
        digest: int,
        key_id: str,
    ) -> RoutingTable:
        by_token = {app.token_sha256: app for app in apps.values()}
        return cls(version, connections, apps, revisions, digest, key_id, by_token)

    def app_for_token(self, token: str) -> AppRoute | None:
        return self.apps_by_token_hash.get(token_sha256(token))

    @property
    def keyring_key_ids(self) -> frozenset[str]:
        """The keyring keys this table's credentials are encrypted with; a key may be retired
        once no replica's table uses it."""
        return frozenset(
            route.credential.encrypted.key_id
            for route in self.connections.values()
            if route.credential.encrypted is not None
        )
