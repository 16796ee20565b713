"""The table feed against a scripted operator on 127.0.0.1 (real TLS, real WebSocket).

The issue these answer: a table past aiohttp's line limit ended the feed task without a word, and
the replica served its old table for ever while /readyz said ready. Here nothing the operator's
end sends (garbage, replays, gaps, frames of another stream, huge snapshots) ends the feed: each
is refused, said back to the operator, and the feed goes on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web

from gatehouse_contract.channel import CHANNEL_PATH, new_nonce, sign_frame, verify_request
from gatehouse_contract.channel_tls import ServerContext
from gatehouse_contract.connection_tests import (
    Failed,
    Problem,
    ReplicaTestOutcome,
    ReplicaTestRequest,
)
from gatehouse_contract.frames import read_replica_message
from gatehouse_contract.keyring import Keyring, KeyringFile
from gatehouse_contract.routes import ConnectionRoute, Credential, Limits, entry_digest
from gatehouse_proxy.table.feed import Answers, TableFeed, TableStore

LIMITS = Limits(
    timeout_seconds=30, max_request_bytes=1, max_response_bytes=1, requests_per_minute=1
)


def route(name: str, paths: int = 1) -> dict[str, Any]:
    connection = ConnectionRoute(
        key=f"shop/{name}",
        uid=f"uid-{name}",
        origin="https://api.example.com",
        allowed_methods=frozenset({"GET"}),
        allowed_paths=tuple(f"/v1/{index:05d}/" + "p" * 10_000 for index in range(paths)),
        credential=Credential(type="none"),
        limits=LIMITS,
    )
    return connection.model_dump(mode="json")


def snapshot(version: int, routes: dict[str, dict[str, Any]]) -> bytes:
    digest = 0
    for key in routes:
        digest ^= entry_digest("connection", key, version)
    return json.dumps(
        {
            "type": "snapshot",
            "version": version,
            "digest": f"{digest:x}",
            "connections": [{"rev": version, "route": r} for r in routes.values()],
            "apps": [],
        }
    ).encode()


def delta(base: int, version: int, before: dict[str, int], upsert: dict[str, Any]) -> bytes:
    """A delta upserting ``upsert`` onto a table whose connections had revisions ``before``."""
    revisions = {**before, **dict.fromkeys(upsert, version)}
    digest = 0
    for key, revision in revisions.items():
        digest ^= entry_digest("connection", key, revision)
    return json.dumps(
        {
            "type": "delta",
            "base": base,
            "version": version,
            "digest": f"{digest:x}",
            "connections": list(upsert.values()),
            "apps": [],
            "removedConnections": [],
            "removedApps": [],
        }
    ).encode()


class Stream:
    """One accepted stream, from the scripted operator's side."""

    def __init__(self, ws: web.WebSocketResponse, nonce: str, keyring: Keyring) -> None:
        self.ws = ws
        self.nonce = nonce
        self.keyring = keyring
        self.seq = 0
        self.heard: list[dict[str, Any]] = []

    async def send(self, payload: bytes) -> None:
        self.seq += 1
        await self.ws.send_bytes(sign_frame(self.keyring, self.nonce, self.seq, payload))

    async def idle(self) -> None:
        """Keeps the stream open (the replica's acks unread) until the replica closes it."""
        async for _ in self.ws:
            pass

    async def hear(self, kind: str) -> dict[str, Any]:
        """The replica's next message of ``kind`` (others are kept in ``heard``)."""
        async with asyncio.timeout(10):
            while True:
                message = await self.ws.receive()
                assert message.type is WSMsgType.TEXT, message
                said = read_replica_message(message.data).model_dump(by_alias=True)
                self.heard.append(said)
                if said["type"] == kind:
                    return said


Script = Callable[[Stream, int], Awaitable[None]]


@asynccontextmanager
async def operator(keyring: Keyring, script: Script) -> AsyncIterator[str]:
    """An operator end that checks the replica's signature and runs ``script`` per stream."""
    streams = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal streams
        nonce = verify_request(
            keyring,
            request.headers["Authorization"],
            request.headers["X-Gatehouse-Replica"],
        )
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        streams += 1
        await script(Stream(ws, nonce, keyring), streams)
        await ws.close()
        return ws

    app = web.Application()
    app.router.add_get(CHANNEL_PATH, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ServerContext(keyring).context)
    await site.start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def no_tests(request: ReplicaTestRequest, sending: Callable[[], None]) -> ReplicaTestOutcome:
    return Failed(error=Problem(code="internal", message=request.path))


async def follow(
    tmp_path: Path, keyring: Keyring, script: Script, until: Callable[[TableStore], bool]
) -> TableStore:
    """Runs a feed against ``script`` until ``until`` holds, and checks it never ended."""
    (tmp_path / "keyring.json").write_text(keyring.dump())
    store = TableStore()
    async with operator(keyring, script) as url:
        feed = TableFeed(
            store, url, KeyringFile(tmp_path / "keyring.json"), "replica-1", Answers(no_tests)
        )
        task = asyncio.create_task(feed.run())
        try:
            async with asyncio.timeout(20):
                while not until(store):
                    assert not task.done(), task
                    await asyncio.sleep(0.02)
            assert not task.done()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return store


def test_a_snapshot_past_any_line_limit_then_deltas_each_acknowledged(tmp_path: Path) -> None:
    keyring = Keyring.generate()
    big = {"shop/a": route("a", paths=200)}
    acks: list[int] = []

    async def script(stream: Stream, number: int) -> None:
        payload = snapshot(10, big)
        assert len(payload) > 2_000_000  # far past any line reader's limit
        await stream.send(payload)
        acks.append((await stream.hear("ack"))["version"])
        await stream.send(delta(10, 11, {"shop/a": 10}, {"shop/b": route("b")}))
        acks.append((await stream.hear("ack"))["version"])
        await stream.send(json.dumps({"type": "heartbeat", "version": 11, "time": 0}).encode())
        acks.append((await stream.hear("ack"))["version"])
        await stream.idle()

    store = asyncio.run(follow(tmp_path, keyring, script, lambda _: len(acks) == 3))
    assert acks == [10, 11, 11]
    assert store.current is not None
    assert sorted(store.current.connections) == ["shop/a", "shop/b"]


def test_refusals_are_said_and_the_table_kept(tmp_path: Path) -> None:
    """A replayed older snapshot, a delta that skips a version, a delta whose digest does not
    match and an unreadable message: each refused or answered with a resync."""
    keyring = Keyring.generate()
    heard: list[dict[str, Any]] = []

    async def script(stream: Stream, number: int) -> None:
        await stream.send(snapshot(20, {"shop/a": route("a")}))
        await stream.hear("ack")
        await stream.send(snapshot(19, {"shop/old": route("old")}))  # a replay
        heard.append(await stream.hear("nack"))
        await stream.send(delta(21, 22, {"shop/a": 20}, {"shop/b": route("b")}))  # a gap
        heard.append(await stream.hear("resync"))
        await stream.send(snapshot(20, {"shop/a": route("a")}))
        await stream.hear("ack")
        await stream.send(delta(20, 21, {"shop/x": 1}, {"shop/b": route("b")}))  # mismatch
        heard.append(await stream.hear("resync"))
        await stream.send(b"{not json")
        heard.append(await stream.hear("resync"))
        await stream.idle()

    store = asyncio.run(follow(tmp_path, keyring, script, lambda _: len(heard) == 4))
    assert heard[0]["installed"] == 20
    assert "older than the installed 20" in heard[0]["reason"]
    assert "a delta from 21 arrived, the table is at 20" in heard[1]["reason"]
    assert "digest" in heard[2]["reason"]
    assert heard[3]["reason"] == "an unreadable message"
    assert store.current is not None
    assert store.current.version == 20
    assert list(store.current.connections) == ["shop/a"]


def test_garbage_and_frames_of_another_stream_reopen_the_stream(tmp_path: Path) -> None:
    keyring = Keyring.generate()
    streams: list[int] = []

    async def script(stream: Stream, number: int) -> None:
        streams.append(number)
        if number == 1:
            await stream.ws.send_bytes(b"\x00garbage")
        elif number == 2:
            # A frame signed for another stream (a recording): refused, the stream reopened.
            other = sign_frame(keyring, new_nonce(), 1, snapshot(5, {"shop/a": route("a")}))
            await stream.ws.send_bytes(other)
        else:
            await stream.send(snapshot(6, {"shop/b": route("b")}))
            await stream.hear("ack")
        await stream.idle()

    def holds_b(store: TableStore) -> bool:
        return store.current is not None and "shop/b" in store.current.connections

    store = asyncio.run(follow(tmp_path, keyring, script, holds_b))
    assert streams == [1, 2, 3]
    assert store.current is not None
    assert list(store.current.connections) == ["shop/b"]
