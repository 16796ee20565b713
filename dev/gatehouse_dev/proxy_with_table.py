"""``python -m gatehouse_dev.proxy_with_table``: the proxy as ``python -m gatehouse_proxy`` runs it
(the same arguments, environment, server, event loop and collector settings), holding a table
the caller wrote rather than one from an operator: a snapshot's JSON in the file
``GATEHOUSE_DEV_TABLE`` names, installed once the proxy's lifespan has made its parts, as
tests/proxy/serving.py installs one in-process.

For ``make bench``'s rows that measure the proxy alone, with no operator beside it on the
machine's cores (a connection's cache, bench_cache; the kinds a header cannot carry,
bench_kinds), each writing its table with :func:`snapshot_of`. The feed still runs: with no
operator at ``GATEHOUSE_OPERATOR_URL`` it retries in the background, and the table stays. The
proxy is told it is the whole fleet (one process), as the operator's heartbeat would tell a single
replica, so that its quotas lease permits as shipped.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import gatehouse_proxy.__main__ as proxy_main
from gatehouse_contract.frames import AppEntry, ConnectionEntry, Snapshot
from gatehouse_contract.routes import AppRoute, ConnectionRoute, entry_digest, token_sha256
from gatehouse_proxy.app import Proxy
from gatehouse_proxy.observation.tracing import Tracing
from gatehouse_proxy.settings import ProxySettings
from gatehouse_proxy.table.routing_table import RoutingTable

TABLE = "GATEHOUSE_DEV_TABLE"


def snapshot_of(routes: Sequence[ConnectionRoute], app_token: str) -> Snapshot:
    """A first table of ``routes`` (of one namespace) and a data app, ``bench``, linking each
    under its name, called with ``app_token``."""
    namespace = routes[0].key.partition("/")[0]
    app = AppRoute(
        key=f"{namespace}/DataApp/bench",
        token_sha256=token_sha256(app_token),
        uid="uid-bench",
        links={route.key.partition("/")[2]: route.key for route in routes},
    )
    digest = entry_digest("app", app.key, 1)
    for route in routes:
        digest ^= entry_digest("connection", route.key, 1)
    return Snapshot(
        version=1,
        digest=f"{digest:x}",
        connections=tuple(ConnectionEntry(rev=1, route=route) for route in routes),
        apps=(AppEntry(rev=1, route=app),),
    )


class ProxyWithTable(Proxy):
    def __init__(self, settings: ProxySettings, tracing: Tracing | None = None) -> None:
        super().__init__(settings, tracing)
        self.snapshot = Snapshot.model_validate_json(Path(os.environ[TABLE]).read_bytes())

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with super().lifespan():
            key_id = self.keyring.current().active
            self.store.install(RoutingTable.from_snapshot(self.snapshot, key_id))
            # The fleet as an operator's heartbeat would count it (this one process): without
            # it, a quota is taken a permit at a time, one store call a request (no leases).
            self.feed.state.fleet = 1
            yield


if __name__ == "__main__":
    # The one name main builds its proxy with (it imports it, and exports it to no one).
    proxy_main.Proxy = ProxyWithTable  # type: ignore[attr-defined]
    sys.exit(proxy_main.main())
