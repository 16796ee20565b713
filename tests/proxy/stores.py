"""Store clients for the proxy's unit tests of what the fleet shares, started on a real
redis-server (tests/proxy/conftest.py) as each proxy worker starts its own."""

from __future__ import annotations

import asyncio

from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.shared_store import SharedStore, StoreSettings


async def store_up(server: RedisServer, deadline_seconds: float = 0.5) -> SharedStore:
    """A store client of its own, once its probe has heard the server (its first round)."""
    store = SharedStore(
        StoreSettings(server.url, password=server.password, deadline_seconds=deadline_seconds)
    )
    await store.start()
    for _ in range(100):
        if store.up:
            return store
        await asyncio.sleep(0.01)
    await store.close()
    raise AssertionError(f"the store at {server.url} did not answer")
