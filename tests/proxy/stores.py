"""Store clients for the proxy's unit tests of what the fleet shares, started on a real
redis-server (tests/proxy/conftest.py) as each proxy worker starts its own, and the route whose
quotas they count."""

from __future__ import annotations

import asyncio

from gatehouse_contract.routes import ConnectionRoute, Credential, Limits
from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.store.shared_store import SharedStore, StoreSettings


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


def quota_route(
    key: str = "team/crm",
    uid: str = "uid-crm",
    *,
    per_app: int = 100,
    per_connection: int = 0,
    per_day: int = 0,
) -> ConnectionRoute:
    """A connection with no credential and these quotas (0: none), as the store counts them."""
    return ConnectionRoute(
        key=key,
        uid=uid,
        origin="https://api.example.com",
        allowed_methods=frozenset({"GET"}),
        allowed_paths=(),
        credential=Credential(type="none"),
        limits=Limits(
            timeout_seconds=10,
            max_request_bytes=1000,
            max_response_bytes=1000,
            requests_per_minute=per_app,
            connection_requests_per_minute=per_connection,
            requests_per_day=per_day,
        ),
    )
