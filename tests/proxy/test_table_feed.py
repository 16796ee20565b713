"""The table feed against a real stream on 127.0.0.1: nothing the stream sends ends it.

The issue it answers: a table past aiohttp's line limit (LineTooLong) ended the feed task without
a word, and the replica served its old table for ever while /readyz said ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

from aiohttp import web

from gatehouse_proxy.routing_table import (
    ConnectionRoute,
    Credential,
    Limits,
    RoutingTable,
    SignedTable,
)
from gatehouse_proxy.sealing import Keyring, KeyringFile
from gatehouse_proxy.table_feed import STREAM_PATH, TableFeed, TableStore

LIMITS = Limits(
    timeout_seconds=30, max_request_bytes=1, max_response_bytes=1, requests_per_minute=1
)


def table(version: int, paths: int) -> RoutingTable:
    route = ConnectionRoute(
        key="shop/vendor",
        uid="c1",
        origin="https://api.example.com",
        allowed_methods=frozenset({"GET"}),
        allowed_paths=tuple(f"/v1/{index:05d}/" + "p" * 10_000 for index in range(paths)),
        credential=Credential(type="none"),
        limits=LIMITS,
    )
    return RoutingTable(version=version, connections={route.key: route})


def line(keyring: Keyring, routing_table: RoutingTable) -> bytes:
    return SignedTable.sign(routing_table, keyring).model_dump_json().encode() + b"\n"


async def stream_server(messages: list[bytes]) -> AsyncGenerator[str, None]:
    """Sends ``messages`` (in small pieces) on the first connection, then answers 500."""
    connections = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal connections
        connections += 1
        if connections > 1:
            return web.Response(status=500)
        reply = web.StreamResponse()
        await reply.prepare(request)
        for message in messages:
            for start in range(0, len(message), 65_536):
                await reply.write(message[start : start + 65_536])
        return reply

    app = web.Application()
    app.router.add_get(STREAM_PATH, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def test_nothing_the_stream_sends_ends_the_feed(tmp_path: Path) -> None:
    keyring = Keyring.generate()
    (tmp_path / "keyring.json").write_text(keyring.dump())
    big = line(keyring, table(2, paths=200))
    assert len(big) > 2_000_000  # far past any line reader's limit
    messages = [
        b"{not json\n",
        b'["a list"]\n',
        big,
        b'{"heartbeat": true}\n',
        line(keyring, table(1, paths=1)),  # older: a replay
    ]

    async def scenario() -> None:
        servers = stream_server(messages)
        url = await anext(servers)
        store = TableStore()
        feed = TableFeed(store, url, KeyringFile(tmp_path / "keyring.json"))
        task = asyncio.create_task(feed.run())
        try:
            for _ in range(100):
                if "HTTP 500" in feed.state.last_error:
                    break
                await asyncio.sleep(0.05)
            assert store.current is not None
            assert store.current.table.version == 2
            assert not task.done()
            assert feed.state.describe()["state"] == "reconnecting"
            assert "HTTP 500" in feed.state.last_error
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await servers.aclose()

    asyncio.run(scenario())
