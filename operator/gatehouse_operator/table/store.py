"""The routes the operator compiled, and which of them changed since the journal last took them.

Handlers put compiled routes in and take them out, with the resource as the watch delivered it
(``api.resource.Resource``: the missed-deletion sweep and the Secret watch read it back, to
reconcile it again) and, for a connection, its parsed spec (which the indexes read; the store does
not keep it: at 3.6 KB each, 20,000 of them would cost the operator 70 MB). The journal takes the
changed keys and publishes them. Each put or drop also keeps the store's three helpers current:
the indexes, the per-namespace byte budget and the start-up gate.
"""

from __future__ import annotations

from gatehouse_contract.routes import AppRoute, ConnectionRoute, EntryKind
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.table.budget import NamespaceBudget, entry_size
from gatehouse_operator.table.indexes import Indexes
from gatehouse_operator.table.startup import StartupGate


class RouteStore:
    def __init__(self) -> None:
        self._connections: dict[str, ConnectionRoute] = {}
        self._connection_resources: dict[str, Resource] = {}
        self._apps: dict[str, AppRoute] = {}
        self._app_resources: dict[str, Resource] = {}
        self._changed: set[tuple[EntryKind, str]] = set()
        self.indexes = Indexes()
        self.budget = NamespaceBudget()
        self.startup = StartupGate()

    # --- Reading ------------------------------------------------------------------------------

    def connection(self, key: str) -> ConnectionRoute | None:
        return self._connections.get(key)

    def app(self, key: str) -> AppRoute | None:
        return self._apps.get(key)

    def route(self, kind: EntryKind, key: str) -> ConnectionRoute | AppRoute | None:
        return self.connection(key) if kind == "connection" else self.app(key)

    def connection_resource(self, key: str) -> Resource | None:
        return self._connection_resources.get(key)

    def app_resource(self, key: str) -> Resource | None:
        return self._app_resources.get(key)

    def connection_keys(self) -> list[str]:
        return list(self._connection_resources)

    def app_keys(self) -> list[str]:
        return list(self._app_resources)

    def unpublished(self, kind: EntryKind, key: str) -> bool:
        """Whether the route changed after the journal last took the changes."""
        return (kind, key) in self._changed

    # --- Changing -----------------------------------------------------------------------------

    def put_connection(
        self,
        route: ConnectionRoute,
        spec: ExternalConnectionSpec,
        resource: Resource,
        size: int | None = None,
    ) -> None:
        self.budget.resize("connection", route.key, size or entry_size(route))
        self._connections[route.key] = route
        self._connection_resources[route.key] = resource
        self.indexes.add_connection(route.key, spec)
        self._changed.add(("connection", route.key))
        self.startup.seen(route.key)

    def drop_connection(self, key: str) -> None:
        self.budget.resize("connection", key, 0)
        self.indexes.remove_connection(key)
        self._connections.pop(key, None)
        self._connection_resources.pop(key, None)
        self._changed.add(("connection", key))
        self.startup.seen(key)

    def put_app(
        self, route: AppRoute, resource: Resource, seen_as: str, size: int | None = None
    ) -> None:
        self.budget.resize("app", route.key, size or entry_size(route))
        self._unindex_app(route.key)
        self.indexes.add_app(route.key, route.links)
        self._apps[route.key] = route
        self._app_resources[route.key] = resource
        self._changed.add(("app", route.key))
        self.startup.seen(seen_as)

    def drop_app(self, key: str, seen_as: str) -> None:
        self.budget.resize("app", key, 0)
        self._unindex_app(key)
        self._apps.pop(key, None)
        self._app_resources.pop(key, None)
        self._changed.add(("app", key))
        self.startup.seen(seen_as)

    def take_changes(self) -> set[tuple[EntryKind, str]]:
        changed, self._changed = self._changed, set()
        return changed

    def _unindex_app(self, key: str) -> None:
        app = self._apps.get(key)
        if app is not None:
            self.indexes.remove_app(key, app.links)
