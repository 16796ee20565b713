"""An upstream that answers with crafted bytes, for what no HTTP server library will send: a 101
nobody asked for, control bytes in a header, a head folded or cut by bare CRs, a transfer coding
other than chunked (red-team round 3, N7 and N8).

Each answer may carry the credential the proxy injected (an API key header's value, or a bearer
token). It runs on 127.0.0.1 in a thread of its own, so a test's event loop (or none) can use it,
and records what became of each connection after an answer: closed by the proxy, or used again.
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Callable
from types import TracebackType

from multidict import CIMultiDict

from gatehouse_dev.echoes import injected
from gatehouse_dev.processes import free_port

_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
# How long an answered connection is watched for the proxy's next request or its closing.
IDLE_SECONDS = 3.0


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)


def _typed(*types: bytes) -> Callable[[bytes], bytes]:
    """An HTML body under these Content-Type headers, as written (round four's R4-7 and the
    grown suite's class 2: each says JSON to a reading other than a browser's)."""
    body = b"<script>alert(document.cookie)</script>"
    head = b"".join(b"Content-Type: " + value + b"\r\n" for value in types)
    return lambda key: (
        b"HTTP/1.1 200 OK\r\n" + head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    )


# Content types an upstream may answer with, by path: what a browser reads in each is below.
TYPED: dict[str, tuple[bytes, ...]] = {
    "/type-twice": (b"application/json", b"text/html"),  # text/html: the last
    "/type-comma": (b"application/json;,text/html",),  # text/html: split at the comma
    "/type-control": (b"application/json\x0b",),  # none: dropped downstream, then sniffed
    "/type-no-break-space": (b"application/json\xc2\xa0",),  # none: U+00A0 is no HTTP space
    "/type-ideographic-space": (b"application/json\xe3\x80\x80",),  # none: nor is U+3000
    "/type-parameters": (b"Application/JSON ; x=<script>",),  # application/json;x="<script>"
    "/type-quoted-comma": (b'application/json; x=",text/html"',),  # application/json, quoted
    "/type-latin1": (b"text/plain; name=\xe9",),  # text/plain;name="\xe9"
}

ANSWERS: dict[str, Callable[[bytes], bytes]] = {
    **{path: _typed(*types) for path, types in TYPED.items()},
    "/type-echo": lambda key: _typed(b"text/" + key)(key),  # the credential as the subtype
    # No upgrade was asked for (the proxy strips Upgrade from apps), yet a 101 and raw bytes.
    "/switching": lambda key: (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n"
        b"raw bytes after the 101: " + key
    ),
    "/control-bytes": lambda key: (
        _OK + b"Cache-Control: a\x01b\x7fc\r\nX-RateLimit-Remaining: 5\x1b[0m\r\n"
        b"Link: <https://x.example/a>;\trel=next\r\nContent-Length: 2\r\n\r\nok"
    ),
    "/transfer-gzip": lambda key: (
        _OK + b"Transfer-Encoding: gzip, chunked\r\n\r\n" + _chunked(gzip.compress(b"key " + key))
    ),
    "/bare-cr": lambda key: (
        _OK + b"Link: <https://x.example/a>\rSet-Cookie: evil=1\r\nContent-Length: 2\r\n\r\nok"
    ),
    "/obs-fold": lambda key: (
        _OK + b"Link: <https://x.example/a>\r\n Set-Cookie: evil=1\r\nContent-Length: 2\r\n\r\nok"
    ),
    "/lf-only": lambda key: (
        b"HTTP/1.1 200 OK\nContent-Type: text/plain\nSet-Cookie: evil=1\nContent-Length: 2\n\nok"
    ),
    "/cl-te": lambda key: (
        _OK + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nevil!"
    ),
    "/early-hints": lambda key: (
        b"HTTP/1.1 103 Early Hints\r\nLink: <https://x.example/?k="
        + key
        + b">\r\n\r\n"
        + _OK
        + b"Content-Length: 2\r\n\r\nok"
    ),
    "/trailer": lambda key: (
        _OK + b"Transfer-Encoding: chunked\r\nTrailer: X-Ratelimit-Echo\r\n\r\n"
        b"2\r\nok\r\n0\r\nX-Ratelimit-Echo: " + key + b"\r\n\r\n"
    ),
    "/split-link": lambda key: (
        _OK + b"Link: <https://x.example/?a=" + key[: len(key) // 2] + b">\r\n"
        b"Link: <https://x.example/?b=" + key[len(key) // 2 :] + b">\r\nContent-Length: 2\r\n\r\nok"
    ),
    "/many-headers": lambda key: (
        _OK
        + b"".join(b"X-Ratelimit-%d: %d\r\n" % (i, i) for i in range(3000))
        + b"Content-Length: 2\r\n\r\nok"
    ),
    "/latin1": lambda key: (
        _OK + b"Link: <https://x.example/\x80\xff\xe9>\r\nContent-Length: 2\r\n\r\nok"
    ),
    "/head-body": lambda key: _OK + b"Content-Length: 20\r\n\r\n" + b"X" * 20,
}


def _headers(head: bytes) -> CIMultiDict[str]:
    fields = (line.partition(b":") for line in head.split(b"\r\n")[1:] if line)
    return CIMultiDict(
        (name.strip().decode("latin-1"), value.strip().decode("latin-1"))
        for name, _, value in fields
    )


class RawUpstream:
    """``with RawUpstream() as upstream``: serving :data:`ANSWERS` at ``upstream.url``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # (path, "closed" | "used again" | "kept open") per answer given.
        self.after: list[tuple[str, str]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def outcomes(self, count: int, timeout: float = IDLE_SECONDS + 2) -> list[tuple[str, str]]:
        """:attr:`after`, once it holds ``count`` outcomes (or the time is up)."""
        deadline = time.monotonic() + timeout
        while len(self.after) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.after)

    def __enter__(self) -> RawUpstream:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", self.port), self._loop
        ).result(timeout=10)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            serving = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in serving:
                task.cancel()
            await asyncio.gather(*serving, return_exceptions=True)
            if self._server is not None:
                await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answered = ""
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_SECONDS)
                except (asyncio.IncompleteReadError, ConnectionError):
                    if answered:
                        self.after.append((answered, "closed"))
                    return
                except TimeoutError:
                    if answered:
                        self.after.append((answered, "kept open"))
                    return
                if answered:
                    self.after.append((answered, "used again"))
                path = head.split(b" ", 2)[1].decode("latin-1").partition("?")[0]
                headers = _headers(head)
                await reader.readexactly(int(headers.get("Content-Length", "0")))
                answer = ANSWERS.get(path)
                writer.write(
                    answer(injected(headers).encode("latin-1"))
                    if answer
                    else b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
                )
                await writer.drain()
                answered = path
        finally:
            writer.close()
            await writer.wait_closed()
