"""The table a request is routed by, and a connection it may use: the door's and the connection
tests' first refusals."""

from __future__ import annotations

from gatehouse_contract.routes import ConnectionRoute
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.table.feed import TableStore
from gatehouse_proxy.table.routing_table import RoutingTable


def current_table(store: TableStore) -> RoutingTable:
    if store.current is None:
        raise ProxyError("not_ready", "the proxy has not received a routing table yet")
    return store.current


def available(connection: ConnectionRoute) -> ConnectionRoute:
    """The connection, unless the operator marked it unavailable (and said why)."""
    if connection.unavailable:
        raise ProxyError("connection_unavailable", connection.unavailable)
    return connection
