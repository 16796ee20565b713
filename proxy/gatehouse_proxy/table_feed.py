"""The proxy's copy of the routing table, kept current over the table channel.

Each replica holds one WebSocket to the operator (see :mod:`gatehouse_proxy.channel`): a snapshot
first, then deltas; every install is acknowledged, every refusal reported with why, and a delta
that does not continue the table (a gap, a digest mismatch) makes the replica ask for a snapshot.
A replica whose operator is away keeps serving the last table it verified and reconnects with
backoff. It is ready only once it holds a table.

No failure ends the feed: each is logged with its cause (once per distinct cause, so a long outage
is one line, not one per retry), the stream is opened again with backoff, and the feed's state,
its last error and the table's age are in ``/readyz`` and the metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from pydantic import ValidationError

from gatehouse_proxy.channel import (
    CHANNEL_PATH,
    HEARTBEAT_SECONDS,
    MAX_FRAME_BYTES,
    MISSED_HEARTBEATS,
    Ack,
    FrameRejected,
    Goodbye,
    Nack,
    ProbeResult,
    Resync,
    new_nonce,
    open_frame,
    sign_request,
)
from gatehouse_proxy.channel_tls import client_context
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.probe_slots import ProbeSlots
from gatehouse_proxy.probes import ProbeRequest
from gatehouse_proxy.routing_table import RoutingTable, TableGap, TableRejected
from gatehouse_proxy.sealing import KeyringFile

log = logging.getLogger("gatehouse.proxy.table")
# The longest wait between attempts to reach the operator.
RECONNECT_CAP_SECONDS = 2.0

ProbeRunner = Callable[[ProbeRequest], Awaitable[dict[str, Any]]]


class TableStore:
    def __init__(self, on_install: Callable[[RoutingTable], None] | None = None) -> None:
        self.current: RoutingTable | None = None
        self.installed_at = 0.0  # time.monotonic() of the last install
        self.on_install = on_install

    def install(self, table: RoutingTable) -> None:
        """Installs a table no older than the current one; an older one (a replay) is refused."""
        if self.current is not None and table.version < self.current.version:
            raise TableRejected(
                f"table {table.version} is older than the installed {self.current.version} "
                "(a replay?)"
            )
        self.current = table
        self.installed_at = time.monotonic()
        if self.on_install is not None:
            self.on_install(table)


class FeedBroken(Exception):
    """The stream broke a rule of the channel; the feed opens it again."""


@dataclass
class FeedState:
    connected: bool = False
    last_error: str = ""
    # time.monotonic() of the last frame (of any kind) from the operator.
    last_message_at: float = 0.0
    snapshots: int = 0
    deltas: int = 0
    rejected: int = 0
    bytes_received: int = 0  # every frame from the operator, as it arrived

    def describe(self) -> dict[str, object]:
        silent = time.monotonic() - self.last_message_at if self.last_message_at else None
        return {
            "state": "connected" if self.connected else "reconnecting",
            "lastError": self.last_error,
            "secondsSinceLastMessage": None if silent is None else round(silent, 1),
            "snapshots": self.snapshots,
            "deltas": self.deltas,
            "rejected": self.rejected,
            "bytesReceived": self.bytes_received,
        }


class TableFeed:
    """Follows the operator's channel until cancelled.

    The feed has a session of its own: the upstream session's resolver refuses private
    addresses, and the operator's Service is one. Only the installation chooses this URL.
    """

    def __init__(
        self,
        store: TableStore,
        operator_url: str,
        keyring: KeyringFile,
        replica: str,
        run_probe: ProbeRunner,
    ) -> None:
        self.store = store
        self.url = operator_url + CHANNEL_PATH
        self.keyring = keyring
        self.replica = replica
        self.run_probe = run_probe
        # Shared by the feed's streams: a reconnect cancels its tests, and their places with them.
        self.probe_slots = ProbeSlots()
        self.state = FeedState()

    async def run(self) -> None:
        async with aiohttp.ClientSession(trust_env=False) as session:
            await self._retry_forever(session)

    async def _retry_forever(self, session: aiohttp.ClientSession) -> None:
        delay = 0.2
        while True:
            try:
                await _Stream(self, session).follow()
            except Exception as error:  # any: no failure may end the feed
                self._failed(error, delay)
            if self.state.connected:  # it had been up: try again quickly
                delay = 0.2
            self.state.connected = False
            # Jittered, so that replicas cut off together do not call back in step; capped low,
            # so that a new leader (the operator fails over in seconds) is found within 2 s.
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))  # noqa: S311 (not a secret)
            delay = min(delay * 2, RECONNECT_CAP_SECONDS)

    def _failed(self, error: Exception, delay: float) -> None:
        cause = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        if cause != self.state.last_error:
            # Once per distinct cause: the state in /readyz says that it goes on.
            log.error(
                "table channel to %s failed (%s); retrying with backoff from %.1fs",
                self.url,
                cause,
                delay,
                exc_info=not isinstance(
                    error, aiohttp.ClientError | OSError | FeedBroken | TimeoutError
                ),
            )
        self.state.last_error = cause


class _Stream:
    """One connection of the feed: its nonce, its frame sequence, its probe tasks."""

    def __init__(self, feed: TableFeed, session: aiohttp.ClientSession) -> None:
        self.feed = feed
        self.session = session
        self.nonce = new_nonce()
        self.next_seq = 1
        # After a gap, deltas are ignored until the snapshot asked for arrives.
        self.awaiting_snapshot = True
        self.snapshot_parts: list[dict[str, Any]] = []
        self.probes: set[asyncio.Task[None]] = set()

    async def follow(self) -> None:
        feed = self.feed
        keyring = feed.keyring.current()
        try:
            async with self.session.ws_connect(
                feed.url,
                headers={
                    "Authorization": sign_request(keyring, feed.replica, self.nonce),
                    "X-Gatehouse-Replica": feed.replica,
                },
                ssl=client_context(keyring),
                max_msg_size=MAX_FRAME_BYTES,
                # A dead operator shows as missing heartbeats.
                timeout=aiohttp.ClientWSTimeout(
                    ws_receive=HEARTBEAT_SECONDS * MISSED_HEARTBEATS, ws_close=5
                ),
                autoping=True,
            ) as ws:
                feed.state.connected = True
                try:
                    async for message in ws:
                        if message.type is not aiohttp.WSMsgType.BINARY:
                            raise FeedBroken(f"the operator sent a {message.type.name} message")
                        await self._receive(ws, message.data)
                except asyncio.CancelledError:
                    # Shutting down: say goodbye, so the operator stops counting this replica
                    # at once instead of reporting its changes pending for a grace period.
                    with contextlib.suppress(ConnectionError):
                        await ws.send_str(Goodbye().model_dump_json())
                    await ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"stopping")
                    raise
                raise FeedBroken(f"the operator closed the stream ({ws.close_code})")
        except aiohttp.WSServerHandshakeError as error:
            raise FeedBroken(f"the operator refused the stream: HTTP {error.status}") from None
        finally:
            for task in self.probes:
                task.cancel()

    async def _receive(self, ws: aiohttp.ClientWebSocketResponse, frame: bytes) -> None:
        feed = self.feed
        feed.state.bytes_received += len(frame)
        try:
            key_id, payload = open_frame(feed.keyring.current(), self.nonce, self.next_seq, frame)
        except FrameRejected as error:
            # Nothing on a stream that carried a false frame can be trusted: open a new one.
            feed.state.rejected += 1
            raise FeedBroken(f"rejected a frame: {error}") from None
        self.next_seq += 1
        feed.state.last_message_at = time.monotonic()
        try:
            message = json.loads(payload)
            kind = message["type"] if isinstance(message, dict) else None
        except (ValueError, KeyError):
            kind, message = None, {}
        if kind == "heartbeat":
            await self._ack(ws)
        elif kind == "snapshot":
            try:
                whole = self._assemble(message)
            except TableGap as gap:
                await self._resync(ws, str(gap))
                return
            if whole is not None:
                await self._install(ws, whole, key_id, snapshot=True)
        elif kind == "delta":
            if not self.awaiting_snapshot:
                await self._install(ws, message, key_id, snapshot=False)
        elif kind == "probe":
            self._probe(ws, message)
        else:
            feed.state.rejected += 1
            log.error("the operator sent a message this replica cannot read")
            await self._resync(ws, "an unreadable message")

    def _assemble(self, part: dict[str, Any]) -> dict[str, Any] | None:
        """The whole snapshot once its last part arrived; parts out of order start it over."""
        number, parts = part.get("part"), part.get("parts")
        if not isinstance(number, int) or not isinstance(parts, int) or number >= parts:
            return part  # refused, with why, by the install
        if number == 0:
            self.snapshot_parts = []
        if number != len(self.snapshot_parts) or (
            self.snapshot_parts and part.get("version") != self.snapshot_parts[0].get("version")
        ):
            self.snapshot_parts = []
            raise TableGap(f"snapshot part {number} of {parts} arrived out of order")
        self.snapshot_parts.append(part)
        if number < parts - 1:
            return None
        collected, self.snapshot_parts = self.snapshot_parts, []
        return {
            **part,
            "connections": [e for p in collected for e in p.get("connections") or ()],
            "apps": [e for p in collected for e in p.get("apps") or ()],
        }

    async def _resync(self, ws: aiohttp.ClientWebSocketResponse, reason: str) -> None:
        log.warning("asking the operator for a snapshot: %s", reason)
        self.awaiting_snapshot = True
        await ws.send_str(Resync(reason=reason[:1000]).model_dump_json())

    async def _ack(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        current = self.feed.store.current
        await ws.send_str(Ack(version=current.version if current else 0).model_dump_json())

    async def _install(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        message: dict[str, Any],
        key_id: str,
        *,
        snapshot: bool,
    ) -> None:
        feed = self.feed
        current = feed.store.current
        version = message.get("version", 0) if isinstance(message.get("version"), int) else 0
        try:
            if snapshot or current is None:
                table = RoutingTable.from_snapshot(message, key_id)
            else:
                table = current.with_delta(message, key_id)
            feed.store.install(table)
        except TableGap as gap:
            await self._resync(ws, str(gap))
            return
        except TableRejected as error:
            feed.state.rejected += 1
            log.error("refused routing table %s: %s", version, error)
            refusal = Nack(
                version=version,
                installed=current.version if current else 0,
                reason=str(error)[:1000],
            )
            await ws.send_str(refusal.model_dump_json())
            return
        self.awaiting_snapshot = False
        if snapshot:
            feed.state.snapshots += 1
            log.info(
                "routing table %d installed from a snapshot: %d connections, %d apps",
                table.version,
                len(table.connections),
                len(table.apps),
            )
        else:
            feed.state.deltas += 1
        feed.state.last_error = ""
        await self._ack(ws)

    def _probe(self, ws: aiohttp.ClientWebSocketResponse, message: dict[str, Any]) -> None:
        arrived = asyncio.get_running_loop().time()

        async def run() -> None:
            probe_id = str(message.get("id", ""))[:100]
            try:
                request = ProbeRequest.model_validate(message.get("request"))
            except ValidationError as error:
                result: dict[str, Any] = {
                    "error": {"code": "invalid_request", "message": str(error)[:1000]}
                }
            else:
                namespace = request.connection.partition("/")[0]
                try:
                    async with self.feed.probe_slots.slot(
                        namespace, arrived + request.within_seconds
                    ):
                        result = await self.feed.run_probe(request)
                except ProxyError as refused:
                    result = {"refused": {"code": refused.code, "message": refused.message}}
                except Exception:  # said to the operator, whose test then fails with it
                    log.exception("a connection test failed inside the proxy")
                    result = {"error": {"code": "internal", "message": "the proxy failed"}}
            # The stream may have closed meanwhile; the operator then retries elsewhere.
            with contextlib.suppress(ConnectionError):
                await ws.send_str(ProbeResult(id=probe_id, result=result).model_dump_json())

        task = asyncio.create_task(run(), name="connection-test")
        self.probes.add(task)
        task.add_done_callback(self.probes.discard)
