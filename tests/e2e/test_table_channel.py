"""The table channel as it runs: the operator and proxy replicas as processes, a real API server.

Ready waits for every replica; thousands of connections reach a replica that starts late (and
one killed in the middle of its snapshot recovers); a replica fed replays and garbage by a
hostile operator end refuses them, says so, and keeps its feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

import httpx
import pytest
import yaml
from aiohttp import web

from gatehouse_contract.channel import (
    CHANNEL_PATH,
    new_nonce,
    sign_frame,
    sign_request,
    verify_frame,
    verify_request,
)
from gatehouse_contract.channel_tls import ServerContext, client_context
from gatehouse_contract.keyring import Keyring
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import log_tail
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    app_token,
    apply,
    connection,
    data_app,
    fetch,
    wait_condition,
)

pytestmark = pytest.mark.e2e

NO_AUTH: dict[str, Any] = {"type": "none"}


def _readyz(url: str) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(f"{url}/readyz", timeout=5).json()
    return body


def _operator_metric(stack: Stack, name: str) -> float:
    """One sample of the operator's metrics (``name`` with its labels, as exposed)."""
    text = httpx.get(f"{stack.local.operator_metrics_url}/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} in the operator's metrics")


@contextmanager
def _frozen(pid: int) -> Iterator[None]:
    """The process stops (no acknowledgement, no heartbeat) until the block ends."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_ready_waits_for_every_serving_replica(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, connection("vendor", stack.upstream, NO_AUTH))
    wait_condition(cluster, namespace, "xc/vendor", "True", "Routed")
    lagging = stack.proxies[1]
    with _frozen(lagging.server.pid):
        apply(cluster, namespace, connection("later", stack.upstream, NO_AUTH))
        pending = wait_condition(cluster, namespace, "xc/later", "False", "PendingProxies")
        assert pending["message"] == "installed on 1 of 2 proxy replicas"
        # Its app says the same, and an app's fetch through the current replica works already.
        apply(cluster, namespace, data_app("sales", {"later": "later"}))
        wait_condition(cluster, namespace, "dataapp/sales", "False", "PendingProxies")
        token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
        assert fetch(stack.proxy, token, "later", "/echo/").status_code == 200
    wait_condition(cluster, namespace, "xc/later", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    assert fetch(lagging.url, token, "later", "/echo/").status_code == 200

    def reasons() -> list[str] | None:
        events = cluster.kubectl(
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector=involvedObject.name=later",
            "-o",
            "json",
        )
        found = [event["reason"] for event in json.loads(events.stdout)["items"]]
        return found if "Routed" in found else None

    assert "PendingProxies" in wait_for(reasons, timeout=20, what="the connection's Events")


def _connections(count: int, upstream: str) -> str:
    return yaml.safe_dump_all(
        connection(f"bulk-{index:05d}", upstream, NO_AUTH, allowedPaths=[f"/echo/{index}/"])
        for index in range(count)
    )


def test_thousands_of_connections_reach_a_replica_started_later(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    count = 2000
    entries = 'gatehouse_operator_table_entries{kind="connection"}'
    before = _operator_metric(stack, entries)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=_connections(count, stack.upstream))
    try:
        wait_for(
            lambda: _operator_metric(stack, entries) >= before + count,
            timeout=180,
            what=f"{count} connections in the operator's table",
        )
        version = _operator_metric(stack, "gatehouse_operator_table_version")
        for proxy in stack.proxies:

            def holds(url: str = proxy.admin_url) -> bool:
                return bool(_readyz(url)["tableVersion"] >= version)

            wait_for(holds, timeout=30, what="the table at both replicas")

        # A replica killed in the middle of its snapshot (a relay passes it the first 256 KiB
        # and holds the rest): the operator never counted it, and a new one (as a Pod restart
        # makes) syncs from scratch.
        with ByteRelay(stack.local.operator_url, stop_after=256 * 1024) as relay:
            doomed = stack.local.start_proxy(operator_url=relay.url)
            wait_for(lambda: relay.forwarded >= 256 * 1024, timeout=30, what="a partial snapshot")
            assert httpx.get(f"{doomed.admin_url}/readyz", timeout=5).status_code == 503
            os.kill(doomed.server.pid, signal.SIGKILL)
        started = time.monotonic()
        late = stack.local.start_proxy()
        try:
            wait_for(lambda: _readyz(late.admin_url).get("ready") is True, timeout=60, what="ready")
            print(
                f"a replica started with {count}+ connections was ready in "
                f"{time.monotonic() - started:.1f}s"
            )
            assert _readyz(late.admin_url)["connections"] >= count

            apply(
                cluster, namespace, data_app("bulk", {"first": "bulk-00000", "last": "bulk-01999"})
            )
            wait_condition(cluster, namespace, "dataapp/bulk", "True", "Routed")
            token = app_token(cluster, namespace, "dataapp-bulk-gatehouse")
            for replica in (*stack.proxies, late):
                reply = fetch(replica.url, token, "last", "/echo/1999/x")
                assert reply.status_code == 200, reply.text
            feed = _readyz(late.admin_url)["feed"]
            assert feed["snapshots"] == 1
            assert feed["deltas"] >= 1
            assert _operator_metric(stack, "gatehouse_operator_proxy_replicas_connected") == 3
        finally:
            late.server.stop()
    finally:
        cluster.kubectl("delete", "xc", "--all", "-n", namespace, "--wait=false")


class InThread:
    """A server on an event loop of its own in a thread, stopped when the block ends."""

    def __init__(self) -> None:
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        raise NotImplementedError

    async def _until_stopped(self, url: str) -> None:
        self.url = url
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()

    def __enter__(self) -> Self:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


class ByteRelay(InThread):
    """A TCP relay to the operator (TLS passes through it untouched) that stops passing the
    operator's bytes on after ``stop_after`` of them, from a thread."""

    def __init__(self, operator_url: str, stop_after: int) -> None:
        super().__init__()
        self.target = operator_url.removeprefix("https://").rsplit(":", 1)
        self.stop_after = stop_after
        self.forwarded = 0

    async def _serve(self) -> None:
        server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        async with server:
            await self._until_stopped(f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}")
            # The listener closes, so no relay starts after this. One that was accepted just
            # before takes its first step now, and is then cancelled like the rest, which closes
            # its sockets (a relay left pending would leave them for the garbage collector).
            # Inside the block: from Python 3.12.1 its exit waits for every connection to close.
            server.close()
            await asyncio.sleep(0)
            relays = asyncio.all_tasks() - {asyncio.current_task()}
            for relay in relays:
                relay.cancel()
            await asyncio.gather(*relays, return_exceptions=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = self.target
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except BaseException:
            writer.close()
            raise

        async def pipe(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, down: bool
        ) -> None:
            while chunk := await source.read(65536):
                if down:
                    room = self.stop_after - self.forwarded
                    chunk = chunk[: max(room, 0)]
                    self.forwarded += len(chunk)
                if chunk:
                    sink.write(chunk)
                    await sink.drain()

        directions = [
            asyncio.ensure_future(pipe(reader, up_writer, False)),
            asyncio.ensure_future(pipe(up_reader, writer, True)),
        ]
        try:
            # Either side closing ends the relayed connection.
            await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for direction in directions:
                direction.cancel()
            await asyncio.gather(*directions, return_exceptions=True)
            for end in (writer, up_writer):
                end.close()
            for end in (writer, up_writer):
                with contextlib.suppress(OSError, asyncio.CancelledError):
                    await end.wait_closed()


# --- A hostile operator end ---------------------------------------------------------------------


class HostileOperator(InThread):
    """Serves the table channel with the stack's keyring, from a thread, and misbehaves.

    Stream 1 gets a frame recorded from the real operator (a replay from another stream),
    stream 2 garbage; stream 3 a good snapshot, then an older one properly signed for it.
    """

    def __init__(self, keyring: Keyring, recorded: bytes) -> None:
        super().__init__()
        self.keyring = keyring
        self.recorded = recorded
        self.streams = 0
        self.heard: list[dict[str, Any]] = []

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_get(CHANNEL_PATH, self._stream)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ServerContext(self.keyring).context)
        await site.start()
        try:
            await self._until_stopped(f"https://127.0.0.1:{runner.addresses[0][1]}")
        finally:
            await runner.cleanup()

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        nonce = verify_request(
            self.keyring, request.headers["Authorization"], request.headers["X-Gatehouse-Replica"]
        )
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.streams += 1
        if self.streams == 1:
            await ws.send_bytes(self.recorded)
        elif self.streams == 2:
            await ws.send_bytes(b"GH1\x02k1" + os.urandom(64))
        else:
            for seq, version in enumerate((9_000_000_000_000, 8_000_000_000_000), start=1):
                snapshot = {
                    "type": "snapshot",
                    "version": version,
                    "digest": "0",
                    "connections": [],
                    "apps": [],
                }
                await ws.send_bytes(
                    sign_frame(self.keyring, nonce, seq, json.dumps(snapshot).encode())
                )
        async for message in ws:
            self.heard.append(json.loads(message.data))
        return ws


def _recorded_frame(stack: Stack, keyring: Keyring) -> bytes:
    """A genuine frame of the real operator, taken from a stream of our own."""

    async def record() -> bytes:
        import aiohttp

        nonce = new_nonce()
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                stack.local.operator_url + CHANNEL_PATH,
                headers={
                    "Authorization": sign_request(keyring, "recorder", nonce),
                    "X-Gatehouse-Replica": "recorder",
                },
                ssl=client_context(keyring),
                max_msg_size=0,
            ) as ws,
        ):
            frame: bytes = await ws.receive_bytes(timeout=10)
            verify_frame(keyring, nonce, 1, frame)  # genuine: it verifies on its own stream
            raw = ws.get_extra_info("socket")
        # A TLS connection closes only after its close_notify exchange, which no one awaits.
        # If asyncio.run closes the loop first, the socket is left for the garbage collector.
        for _ in range(500):
            if raw.fileno() == -1:
                break
            await asyncio.sleep(0.01)
        return frame

    return asyncio.run(record())


def test_a_replica_refuses_replays_and_garbage_and_keeps_its_feed(stack: Stack) -> None:
    keyring = Keyring.parse(stack.local.keyring_file.read_text())
    with HostileOperator(keyring, _recorded_frame(stack, keyring)) as hostile:
        replica = stack.local.start_proxy(operator_url=hostile.url)
        try:
            wait_for(
                lambda: any(said.get("type") == "nack" for said in hostile.heard),
                timeout=30,
                what="the replica's refusal of the older snapshot",
            )
            ready = _readyz(replica.admin_url)
            assert ready["tableVersion"] == 9_000_000_000_000
            assert ready["feed"]["state"] == "connected"
            assert ready["feed"]["rejected"] >= 3
            assert hostile.streams == 3
            nack = next(said for said in hostile.heard if said["type"] == "nack")
            assert nack["installed"] == 9_000_000_000_000
            assert "older than the installed" in nack["reason"]
            log = log_tail(replica.server.log_path, 200)
            assert "not for this stream" in log  # the replayed frame
            assert "refused routing table 8000000000000" in log
            assert "Traceback" not in log
        finally:
            replica.server.stop()
