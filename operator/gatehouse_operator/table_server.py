"""Pushing signed routing tables to the proxy replicas.

Each replica keeps a request open on ``GET /v1/routing-table/stream``; the operator writes the
current signed table at once, every new one as it is published, and a heartbeat in between. The
replica authenticates with a channel token derived from the shared keyring; the tables are signed
with a key derived from it, so neither side trusts the network between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gatehouse_proxy.probes import channel_authorised
from gatehouse_proxy.routing_table import RoutingTable, SignedTable
from gatehouse_proxy.sealing import KeyringSource
from gatehouse_proxy.table_feed import HEARTBEAT_SECONDS, STREAM_PATH

log = logging.getLogger("gatehouse.operator.tables")


class Publisher:
    def __init__(self, keyring: KeyringSource) -> None:
        self.keyring = keyring
        self.current: SignedTable | None = None
        self.version = 0
        self._changed = asyncio.Event()

    def publish(self, table: RoutingTable) -> None:
        self.current = SignedTable.sign(table, self.keyring.current())
        self.version = table.version
        self._changed.set()
        self._changed = asyncio.Event()
        log.info(
            "published routing table %d: %d connections, %d apps",
            table.version,
            len(table.connections),
            len(table.apps),
        )

    async def updates(self) -> AsyncIterator[bytes]:
        sent: SignedTable | None = None
        while True:
            # Taken before the check: a table published while we yield sets this very event.
            changed = self._changed
            if self.current is not None and self.current is not sent:
                sent = self.current
                yield sent.model_dump_json().encode() + b"\n"
                continue
            try:
                await asyncio.wait_for(changed.wait(), HEARTBEAT_SECONDS)
            except TimeoutError:
                yield json.dumps({"heartbeat": True}).encode() + b"\n"

    def authorised(self, request: Request) -> bool:
        return channel_authorised(request.headers.get("authorization", ""), self.keyring)


def create_app(publisher: Publisher) -> Starlette:
    async def stream(request: Request) -> Response:
        if not publisher.authorised(request):
            return JSONResponse(
                {
                    "error": {
                        "code": "unauthenticated",
                        "message": "a valid channel token is required",
                    }
                },
                status_code=401,
            )
        return StreamingResponse(publisher.updates(), media_type="application/x-ndjson")

    async def healthz(request: Request) -> Response:
        key_id = publisher.current.key_id if publisher.current else ""
        return JSONResponse({"ok": True, "tableVersion": publisher.version, "keyId": key_id})

    return Starlette(routes=[Route(STREAM_PATH, stream), Route("/healthz", healthz)])


class EmbeddedServer(uvicorn.Server):
    """uvicorn inside kopf's event loop: kopf, not uvicorn, owns the process's signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
