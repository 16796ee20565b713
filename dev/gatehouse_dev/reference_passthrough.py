"""The benchmark's yardstick: the least a Starlette + aiohttp proxy can do.

It forwards every request to one upstream URL with a fixed header and streams the answer back:
no table, no checks, no injection. ``make bench`` measures Gatehouse's proxy against it in the
same run. ``GATEHOUSE_REFERENCE_UPSTREAM`` names the upstream URL.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import aiohttp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route


class Passthrough:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.session: aiohttp.ClientSession | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            self.session = session
            yield

    async def forward(self, request: Request) -> Response:
        assert self.session is not None
        upstream = await self.session.get(self.upstream, headers={"Authorization": "Bearer x"})

        async def body() -> AsyncIterator[bytes]:
            async for chunk in upstream.content.iter_chunked(65536):
                yield chunk
            upstream.release()

        return StreamingResponse(
            body(),
            status_code=upstream.status,
            headers={"content-type": upstream.headers.get("content-type", "")},
        )


passthrough = Passthrough(os.environ.get("GATEHOUSE_REFERENCE_UPSTREAM", ""))
app = Starlette(routes=[Route("/{path:path}", passthrough.forward)], lifespan=passthrough.lifespan)
