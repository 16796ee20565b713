"""The operator's picture of the cluster: the routes it compiled, and which of them changed.

Handlers put compiled routes in and take them out; the journal (see table_journal) takes the
changed keys and publishes them. A freshly started operator holds its first table back until it
has seen every resource that existed when it started (or a deadline passes), so a restart never
publishes a partial table.
"""

from __future__ import annotations

import time
from typing import Any

from gatehouse_contract.routes import AppRoute, ConnectionRoute, EntryKind


class World:
    def __init__(self) -> None:
        self.connections: dict[str, ConnectionRoute] = {}
        self.connection_bodies: dict[str, dict[str, Any]] = {}
        self.apps: dict[str, AppRoute] = {}
        self.app_bodies: dict[str, dict[str, Any]] = {}
        # Indexes, so that a change costs the same with 10 resources as with 10,000.
        self._secret_users: dict[tuple[str, str], set[str]] = {}
        self._linkers: dict[str, set[str]] = {}
        # Bytes each route takes in the table, and their sum per namespace (see table_bounds).
        self._sizes: dict[tuple[EntryKind, str], int] = {}
        self._namespace_sizes: dict[str, int] = {}
        # Routes put or dropped since the journal last took them.
        self.changed: set[tuple[EntryKind, str]] = set()
        self._pending: set[str] = set()
        self._sync_deadline = 0.0

    def expect(self, keys: set[str], within: float) -> None:
        """Holds the first table back until these keys were seen, for at most ``within`` s."""
        self._pending = set(keys)
        self._sync_deadline = time.monotonic() + within

    @property
    def synced(self) -> bool:
        return not self._pending or time.monotonic() > self._sync_deadline

    def _seen(self, key: str) -> None:
        self._pending.discard(key)

    def namespace_total_with(self, kind: EntryKind, key: str, size: int) -> int:
        """The bytes ``key``'s namespace would take if its route took ``size``."""
        namespace = key.split("/", 1)[0]
        return self._namespace_sizes.get(namespace, 0) - self._sizes.get((kind, key), 0) + size

    def _resize(self, kind: EntryKind, key: str, size: int) -> None:
        namespace = key.split("/", 1)[0]
        total = self.namespace_total_with(kind, key, size)
        if size:
            self._sizes[kind, key] = size
        else:
            self._sizes.pop((kind, key), None)
        if total:
            self._namespace_sizes[namespace] = total
        else:
            self._namespace_sizes.pop(namespace, None)

    def put_connection(
        self, route: ConnectionRoute, body: dict[str, Any], size: int | None = None
    ) -> None:
        self._resize("connection", route.key, size or len(route.model_dump_json()))
        self._unindex_connection(route.key)
        self.connections[route.key] = route
        self.connection_bodies[route.key] = body
        self._secret_users.setdefault(_secret_of(body), set()).add(route.key)
        self.changed.add(("connection", route.key))
        self._seen(route.key)

    def drop_connection(self, key: str) -> None:
        self._resize("connection", key, 0)
        self._unindex_connection(key)
        self.connections.pop(key, None)
        self.connection_bodies.pop(key, None)
        self.changed.add(("connection", key))
        self._seen(key)

    def put_app(
        self, route: AppRoute, body: dict[str, Any], seen_as: str, size: int | None = None
    ) -> None:
        self._resize("app", route.key, size or len(route.model_dump_json()))
        self._unindex_app(route.key)
        for connection in route.links.values():
            self._linkers.setdefault(connection, set()).add(route.key)
        self.apps[route.key] = route
        self.app_bodies[route.key] = body
        self.changed.add(("app", route.key))
        self._seen(seen_as)

    def drop_app(self, key: str, seen_as: str) -> None:
        self._resize("app", key, 0)
        self._unindex_app(key)
        self.apps.pop(key, None)
        self.app_bodies.pop(key, None)
        self.changed.add(("app", key))
        self._seen(seen_as)

    def _unindex_connection(self, key: str) -> None:
        body = self.connection_bodies.get(key)
        if body is not None:
            users = self._secret_users.get(_secret_of(body), set())
            users.discard(key)
            if not users:
                self._secret_users.pop(_secret_of(body), None)

    def _unindex_app(self, key: str) -> None:
        app = self.apps.get(key)
        for connection in app.links.values() if app else ():
            linkers = self._linkers.get(connection, set())
            linkers.discard(key)
            if not linkers:
                self._linkers.pop(connection, None)

    def connections_using_secret(self, namespace: str, name: str) -> list[str]:
        return sorted(self._secret_users.get((namespace, name), ()))

    def apps_linking(self, connection_key: str) -> list[str]:
        return sorted(self._linkers.get(connection_key, ()))

    def route(self, kind: EntryKind, key: str) -> ConnectionRoute | AppRoute | None:
        return self.connections.get(key) if kind == "connection" else self.apps.get(key)

    def take_changes(self) -> set[tuple[EntryKind, str]]:
        changed, self.changed = self.changed, set()
        return changed


def _secret_of(body: dict[str, Any]) -> tuple[str, str]:
    """(namespace, Secret name) a connection takes its credential from; name "" for none."""
    ref = body.get("spec", {}).get("auth", {}).get("secretRef") or {}
    return body["metadata"]["namespace"], str(ref.get("name") or "")
