"""The operator's picture of the cluster, and the routing table it compiles into.

Handlers put compiled routes in and take them out; after every change the world offers a new
table. A freshly started operator holds its first table back until it has seen every resource that
existed when it started (or a deadline passes), so a restart never publishes a partial table.
"""

from __future__ import annotations

import time
from typing import Any

from gatehouse_proxy.routing_table import AppRoute, ConnectionRoute, RoutingTable


class World:
    def __init__(self) -> None:
        self.connections: dict[str, ConnectionRoute] = {}
        self.connection_bodies: dict[str, dict[str, Any]] = {}
        self.apps: dict[str, AppRoute] = {}
        self.app_bodies: dict[str, dict[str, Any]] = {}
        self.version = 0
        self._pending: set[str] = set()
        self._sync_deadline = 0.0
        self._last_content = ""

    def expect(self, keys: set[str], within: float) -> None:
        """Holds the first table back until these keys were seen, for at most ``within`` s."""
        self._pending = set(keys)
        self._sync_deadline = time.monotonic() + within

    @property
    def synced(self) -> bool:
        return not self._pending or time.monotonic() > self._sync_deadline

    def _seen(self, key: str) -> None:
        self._pending.discard(key)

    def put_connection(self, route: ConnectionRoute, body: dict[str, Any]) -> None:
        self.connections[route.key] = route
        self.connection_bodies[route.key] = body
        self._seen(route.key)

    def drop_connection(self, key: str) -> None:
        self.connections.pop(key, None)
        self.connection_bodies.pop(key, None)
        self._seen(key)

    def put_app(self, route: AppRoute, body: dict[str, Any], seen_as: str) -> None:
        self.apps[route.key] = route
        self.app_bodies[route.key] = body
        self._seen(seen_as)

    def drop_app(self, key: str, seen_as: str) -> None:
        self.apps.pop(key, None)
        self.app_bodies.pop(key, None)
        self._seen(seen_as)

    def connections_using_secret(self, namespace: str, name: str) -> list[str]:
        users = []
        for key, body in self.connection_bodies.items():
            ref = body.get("spec", {}).get("auth", {}).get("secretRef") or {}
            if body["metadata"]["namespace"] == namespace and ref.get("name") == name:
                users.append(key)
        return users

    def apps_linking(self, connection_key: str) -> list[str]:
        return [key for key, app in self.apps.items() if connection_key in app.links.values()]

    def next_table(self) -> RoutingTable | None:
        """A new table if anything changed since the last one (and the world is synced)."""
        if not self.synced:
            return None
        table = RoutingTable(
            version=0,
            connections=dict(sorted(self.connections.items())),
            apps=tuple(self.apps[key] for key in sorted(self.apps)),
        )
        content = table.model_dump_json()
        if content == self._last_content:
            return None
        self._last_content = content
        # Milliseconds since the epoch, and always increasing: a restarted operator's tables
        # are newer than its predecessor's without any stored counter.
        self.version = max(self.version + 1, int(time.time() * 1000))
        return table.model_copy(update={"version": self.version})
