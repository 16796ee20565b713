"""A store client closes at once whatever its probe is doing: a proxy that cannot start (its port
taken) shuts down through it, and must exit, not hang."""

from __future__ import annotations

import asyncio

from gatehouse_dev.redis_server import RedisServer
from gatehouse_proxy.store.shared_store import SharedStore, StoreSettings


def test_closing_just_after_starting_returns_at_once(redis_server: RedisServer) -> None:
    """Closed while its first ping is under way (as when uvicorn cannot bind and shuts the app
    down at once), the client once finished the ping and the probe slept on, cancelled but not
    stopped: close() never returned, nor did the proxy."""

    async def scenario() -> None:
        for attempt in range(200):
            store = SharedStore(StoreSettings(redis_server.url, password=redis_server.password))
            await store.start()
            # From before the ping is sent to after its answer came (~1-3 ms here).
            await asyncio.sleep(0.00002 * attempt)
            await asyncio.wait_for(store.close(), timeout=2)

    asyncio.run(scenario())


def test_closing_while_the_probe_waits_on_a_silent_store_returns_at_once() -> None:
    async def scenario() -> None:
        accepted = asyncio.Event()

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.set()
            await reader.read()
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        url = f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}/0"
        try:
            for attempt in range(20):  # at points before, at and after the ping's deadline
                store = SharedStore(StoreSettings(url, deadline_seconds=0.05))
                await store.start()
                await asyncio.wait_for(accepted.wait(), timeout=5)
                accepted.clear()
                await asyncio.sleep(0.015 * attempt)
                await asyncio.wait_for(store.close(), timeout=2)
        finally:
            server.close()

    asyncio.run(scenario())
