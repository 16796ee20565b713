"""The proxy's copy of the routing table, kept current from the operator's table stream.

Each replica holds a long-lived request to the operator, which writes a signed table whenever one
changes (and a heartbeat in between). A replica that starts later gets the current table first
thing; one whose operator is away keeps serving the last table it verified and reconnects with
backoff. The replica is ready only once it holds a table.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from pydantic import ValidationError

from gatehouse_proxy.routing_table import AppRoute, RoutingTable, SignedTable, token_sha256
from gatehouse_proxy.sealing import KeyringError, KeyringFile

log = logging.getLogger("gatehouse.proxy.table")

STREAM_PATH = "/v1/routing-table/stream"
HEARTBEAT_SECONDS = 10.0


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
        self.on_install = on_install

    def install(self, table: RoutingTable, key_id: str) -> bool:
        if self.current is not None and self.current.table.version == table.version:
            return False
        self.current = ActiveTable.of(table, key_id)
        if self.on_install is not None:
            self.on_install(table)
        log.info(
            "routing table %d installed: %d connections, %d apps",
            table.version,
            len(table.connections),
            len(table.apps),
        )
        return True


class TableFeed:
    """Follows the operator's stream until cancelled.

    The feed has a session of its own: the upstream session's resolver refuses private
    addresses, and the operator's Service is one. Only the installation chooses this URL.
    """

    def __init__(self, store: TableStore, operator_url: str, keyring: KeyringFile) -> None:
        self.store = store
        self.url = operator_url + STREAM_PATH
        self.keyring = keyring

    async def run(self) -> None:
        async with aiohttp.ClientSession(trust_env=False) as session:
            await self._retry_forever(session)

    async def _retry_forever(self, session: aiohttp.ClientSession) -> None:
        delay = 0.2
        while True:
            try:
                await self._follow(session)
                delay = 0.2
            except (aiohttp.ClientError, OSError, TimeoutError, KeyringError) as error:
                log.warning(
                    "table stream from %s interrupted (%s); retrying in %.1fs",
                    self.url,
                    type(error).__name__,
                    delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

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
                raise aiohttp.ClientResponseError(
                    reply.request_info, (), status=reply.status, message="table stream refused"
                )
            async for line in reply.content:
                if line.strip():
                    self._receive(line)

    def _receive(self, line: bytes) -> None:
        message = json.loads(line)
        if message.get("heartbeat"):
            return
        try:
            signed = SignedTable.model_validate(message)
            table = signed.verified(self.keyring.current())
        except (ValidationError, ValueError) as error:
            # Never install what does not verify; keep serving the last good table.
            log.error("rejected a routing table: %s", type(error).__name__)
            return
        self.store.install(table, signed.key_id)
