"""``python -m gatehouse_dev.proxy_with_table``: the proxy as ``python -m gatehouse_proxy`` runs it
(the same arguments, environment, server, event loop and collector settings), holding a table
the caller wrote rather than one from an operator: a snapshot's JSON in the file
``GATEHOUSE_DEV_TABLE`` names, installed once the proxy's lifespan has made its parts, as
tests/proxy/serving.py installs one in-process.

For ``make bench``'s rows of what the operator does not compile into the table yet on this
branch (a connection's cache, see bench_cache). The feed still runs: with no operator at
``GATEHOUSE_OPERATOR_URL`` it retries in the background, and the table stays. The proxy is told
it is the whole fleet (one process), as the operator's heartbeat would tell a single replica, so
that its quotas lease permits as shipped.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import gatehouse_proxy.__main__ as proxy_main
from gatehouse_contract.frames import Snapshot
from gatehouse_proxy.app import Proxy
from gatehouse_proxy.observation.tracing import Tracing
from gatehouse_proxy.settings import ProxySettings
from gatehouse_proxy.table.routing_table import RoutingTable

TABLE = "GATEHOUSE_DEV_TABLE"


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
