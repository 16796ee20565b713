"""An answer from the connection's cache, sent to the app: the headers the vendor's answer was
relayed with, its age (``Age``, RFC 9111 5.1) and what the cache did (``Cache-Status``, RFC 9211,
this cache named ``gatehouse``), in two writes with its length, as a whole relayed answer goes.

The body was scrubbed and the headers filtered before the answer was kept; the browser an app
hands it to reads it as the type that was checked (``X-Content-Type-Options: nosniff``). An
answer the cache did not give (``relayed_status``) says how it went to the vendor instead.
"""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from gatehouse_proxy.caching.response_cache import Served

CACHE_NAME = "gatehouse"
_BODILESS = frozenset({204, 304})
# How a request the cache did not answer went to the vendor (RFC 9211 2.2), by Fetch.cache.
_FORWARDED = {"bypass": "fwd=bypass", "miss": "fwd=uri-miss"}


def relayed_status(outcome: str, status: int) -> tuple[bytes, bytes]:
    """The Cache-Status of an answer relayed from the vendor on a connection with a cache."""
    forwarded = _FORWARDED.get(outcome, "fwd=uri-miss")
    return (b"cache-status", f"{CACHE_NAME}; {forwarded}; fwd-status={status}".encode())


class CachedResponse:
    def __init__(self, served: Served, now: float) -> None:
        answer = served.answer
        self.status_code = answer.status
        self.body = answer.body
        self.headers = [
            (b"x-content-type-options", b"nosniff"),
            *((name.encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers),
            (b"age", str(answer.age(now)).encode()),
            (b"cache-status", f"{CACHE_NAME}; {served.status}".encode()),
        ]
        # What the fetch's record reads, as of a relayed answer.
        self.sent_bytes = 0
        self.cut_code = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = self.headers
        body = self.body
        if self.status_code not in _BODILESS:
            headers = [*headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        self.sent_bytes = len(body)
