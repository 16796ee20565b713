"""The benchmark's floor: the least a proxy on the proxy's own stack can do.

Plain ASGI on the server, loop and client the proxy runs on (uvicorn with httptools, uvloop,
aiohttp): each request is sent to one upstream with a fixed header, its answer read whole and
relayed in one body message, with its status and Content-Type. No table, no checks, no
injection, no tenants, nothing observed. ``make bench`` measures Gatehouse's proxy against it in
the same run: what the proxy does above the floor is what its rules cost.
``GATEHOUSE_FLOOR_UPSTREAM`` names the upstream URL (the request's path is appended).
"""

from __future__ import annotations

import os

import aiohttp
from starlette.types import Receive, Scope, Send

from gatehouse_dev.nginx import HEADER


class Floor:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        assert self.session is not None
        async with self.session.request(
            scope["method"],
            self.upstream + scope["path"],
            headers=[HEADER],
            data=body or None,
        ) as upstream:
            answer = await upstream.read()
            content_type = upstream.headers.get("content-type", "").encode("latin-1")
            await send(
                {
                    "type": "http.response.start",
                    "status": upstream.status,
                    "headers": [
                        (b"content-type", content_type),
                        (b"content-length", str(len(answer)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": answer})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            self.session = session
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})


app = Floor(os.environ.get("GATEHOUSE_FLOOR_UPSTREAM", ""))
