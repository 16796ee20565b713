"""A prototype, for ``make bench`` only: the stack's floor with aiohttp's client replaced by a
minimal HTTP/1.1 client on llhttp (httptools, the parser uvicorn already uses).

What replacing the proxy's upstream client would buy, measured rather than guessed: the same
plain-ASGI pass-through as :mod:`gatehouse_dev.floor_passthrough` (one upstream, a fixed header,
the answer read whole and relayed in one body message), with a client that keeps idle
connections in a list, writes the request head in one ``write`` and parses the answer with
llhttp's callbacks. It does what the bench's requests need and nothing else: no TLS, no
redirects, no timeouts, no chunked request bodies, no limits, no error handling beyond dropping a
broken connection. It is not a client the proxy could ship; what a real one would cost on top
(timeouts, TLS, bounds, the network guard) is exactly what aiohttp does beside the call.
``GATEHOUSE_FLOOR_UPSTREAM`` names the upstream URL (``http://host:port``).
"""

from __future__ import annotations

import asyncio
import os
from urllib.parse import urlsplit

import httptools
from starlette.types import Receive, Scope, Send

from gatehouse_dev.nginx import HEADER


class _Connection(asyncio.Protocol):
    """One kept-alive connection: a request written, its answer parsed as it arrives."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.answer: asyncio.Future[tuple[int, list[tuple[bytes, bytes]], bytes]] | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.reusable = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(exc or ConnectionError("the upstream closed"))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.reusable = self.parser.should_keep_alive()
        assert self.answer is not None
        self.answer.set_result((self.parser.get_status_code(), self.headers, b"".join(self.body)))

    def send(self, head: bytes) -> asyncio.Future[tuple[int, list[tuple[bytes, bytes]], bytes]]:
        self.headers, self.body = [], []
        self.answer = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(head)
        return self.answer


class RawClient:
    """Idle connections to one upstream, reused most recent first."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.host_header = parts.netloc.encode()
        self.idle: list[_Connection] = []

    async def get(
        self, path: bytes, headers: list[tuple[bytes, bytes]]
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        if self.idle:
            connection = self.idle.pop()
        else:
            _, connection = await asyncio.get_running_loop().create_connection(
                _Connection, self.host, self.port
            )
        lines = [b"GET ", path, b" HTTP/1.1\r\nHost: ", self.host_header, b"\r\n"]
        for name, value in headers:
            lines += [name, b": ", value, b"\r\n"]
        lines.append(b"\r\n")
        answer = await connection.send(b"".join(lines))
        if connection.reusable:
            self.idle.append(connection)
        elif connection.transport is not None:
            connection.transport.close()
        return answer


class RawFloor:
    def __init__(self, upstream: str) -> None:
        self.client = RawClient(upstream)
        self.header = [(HEADER[0].encode(), HEADER[1].encode())]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        more = True
        while more:  # the bench's requests have no body
            more = (await receive()).get("more_body", False)
        status, headers, answer = await self.client.get(scope["raw_path"], self.header)
        content_type = next((v for n, v in headers if n.lower() == b"content-type"), b"")
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type),
                    (b"content-length", str(len(answer)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer})


app = RawFloor(os.environ.get("GATEHOUSE_FLOOR_UPSTREAM", ""))
