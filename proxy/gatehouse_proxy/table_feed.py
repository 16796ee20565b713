"""The proxy's copy of the routing table, kept current from the operator's table stream.

Each replica holds a long-lived request to the operator, which writes a signed table whenever one
changes (and a heartbeat in between). A replica that starts later gets the current table first
thing; one whose operator is away keeps serving the last table it verified and reconnects with
backoff. The replica is ready only once it holds a table.

No failure ends the feed: each is logged with its cause (once per distinct cause, so a long outage
is one line, not one per retry), the stream is opened again with backoff, and the feed's state,
its last error and the table's age are in ``/readyz`` and the metrics. Lines are split here, with
a bound of the feed's own (MAX_MESSAGE_BYTES), not by a line reader's 64 KiB-ish limit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from pydantic import ValidationError

from gatehouse_proxy.routing_table import AppRoute, RoutingTable, SignedTable, token_sha256
from gatehouse_proxy.sealing import KeyringFile

log = logging.getLogger("gatehouse.proxy.table")

STREAM_PATH = "/v1/routing-table/stream"
HEARTBEAT_SECONDS = 10.0
# The largest message (a whole signed table) a replica accepts: far above what 10,000 connections
# make, and a bound on what a broken or hostile stream can make it buffer.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ActiveTable:
    """A verified table with the lookups the hot path needs."""

    table: RoutingTable
    key_id: str
    apps_by_token_hash: dict[str, AppRoute] = field(default_factory=dict)

    @classmethod
    def of(cls, table: RoutingTable, key_id: str) -> ActiveTable:
        return cls(table, key_id, {app.token_sha256: app for app in table.apps})

    def app_for_token(self, token: str) -> AppRoute | None:
        return self.apps_by_token_hash.get(token_sha256(token))


class TableStore:
    def __init__(self, on_install: Callable[[RoutingTable], None] | None = None) -> None:
        self.current: ActiveTable | None = None
        self.installed_at = 0.0  # time.monotonic() of the last install
        self.on_install = on_install

    def install(self, table: RoutingTable, key_id: str) -> bool:
        """Installs a newer table. An older one (a replay) or the same one again is refused."""
        if self.current is not None and table.version <= self.current.table.version:
            if table.version < self.current.table.version:
                log.error(
                    "refused routing table %d: older than the installed %d (a replay?)",
                    table.version,
                    self.current.table.version,
                )
            return False
        self.current = ActiveTable.of(table, key_id)
        self.installed_at = time.monotonic()
        if self.on_install is not None:
            self.on_install(table)
        log.info(
            "routing table %d installed: %d connections, %d apps",
            table.version,
            len(table.connections),
            len(table.apps),
        )
        return True


class FeedBroken(Exception):
    """The stream broke a rule of the channel; the feed opens it again."""


@dataclass
class FeedState:
    connected: bool = False
    last_error: str = ""
    # time.monotonic() of the last message (table or heartbeat) from the operator.
    last_message_at: float = 0.0

    def describe(self) -> dict[str, object]:
        silent = time.monotonic() - self.last_message_at if self.last_message_at else None
        return {
            "state": "connected" if self.connected else "reconnecting",
            "lastError": self.last_error,
            "secondsSinceLastMessage": None if silent is None else round(silent, 1),
        }


class TableFeed:
    """Follows the operator's stream until cancelled.

    The feed has a session of its own: the upstream session's resolver refuses private
    addresses, and the operator's Service is one. Only the installation chooses this URL.
    """

    def __init__(self, store: TableStore, operator_url: str, keyring: KeyringFile) -> None:
        self.store = store
        self.url = operator_url + STREAM_PATH
        self.keyring = keyring
        self.state = FeedState()

    async def run(self) -> None:
        async with aiohttp.ClientSession(trust_env=False) as session:
            await self._retry_forever(session)

    async def _retry_forever(self, session: aiohttp.ClientSession) -> None:
        delay = 0.2
        while True:
            try:
                await self._follow(session)
            except Exception as error:  # any: no failure may end the feed
                self._failed(error, delay)
            if self.state.connected:  # it had been up: try again quickly
                delay = 0.2
            self.state.connected = False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _failed(self, error: Exception, delay: float) -> None:
        cause = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        if cause != self.state.last_error:
            # Once per distinct cause: the state in /readyz says that it goes on.
            log.error(
                "table stream from %s failed (%s); retrying with backoff from %.1fs",
                self.url,
                cause,
                delay,
                exc_info=not isinstance(error, aiohttp.ClientError | OSError | FeedBroken),
            )
        self.state.last_error = cause

    async def _follow(self, session: aiohttp.ClientSession) -> None:
        keyring = self.keyring.current()
        async with session.get(
            self.url,
            headers={"Authorization": f"Bearer {keyring.channel_token()}"},
            # A dead operator shows as missing heartbeats.
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=5, sock_read=HEARTBEAT_SECONDS * 3
            ),
        ) as reply:
            if reply.status != 200:
                raise FeedBroken(f"the operator answered HTTP {reply.status}")
            self.state.connected = True
            pending = bytearray()
            async for chunk in reply.content.iter_any():
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    line = bytes(pending[:end])
                    del pending[: end + 1]
                    self._receive(line)
                if len(pending) > MAX_MESSAGE_BYTES:
                    raise FeedBroken(f"a message exceeded {MAX_MESSAGE_BYTES} bytes")
        raise FeedBroken("the operator closed the stream")

    def _receive(self, line: bytes) -> None:
        self.state.last_message_at = time.monotonic()
        if not line.strip():
            return
        try:
            message = json.loads(line)
            if isinstance(message, dict) and message.get("heartbeat"):
                return
            signed = SignedTable.model_validate(message)
            table = signed.verified(self.keyring.current())
        except (ValidationError, ValueError) as error:
            # Never install what does not verify; keep serving the last good table.
            log.error("rejected a routing table: %s", type(error).__name__)
            return
        if self.store.install(table, signed.key_id):
            self.state.last_error = ""
