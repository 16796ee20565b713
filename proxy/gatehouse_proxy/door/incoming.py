"""An app's request as the ASGI server hands it over: its head, and its body read within bounds.

Read straight from the ASGI scope and ``receive``, with no framework object per request (see
docs/development/performance.md, "Where a request's time goes (the profile)"). Header values are
decoded as Latin-1, as HTTP carries them and as Starlette decodes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.types import Receive, Scope

from gatehouse_contract.numerals import whole_number
from gatehouse_proxy.errors import ProxyError, ProxyException

# Pieces of a request body are kept at least this large: a client that sends a byte at a time
# must not make the proxy hold an object (and its overhead) per byte.
_PIECE_BYTES = 64 * 1024


class AppWentAway(ProxyException):
    """The app hung up before its request's body had arrived: there is nobody to answer."""


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of the (lower-case) header ``name``, if the request has it."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class AppRequest:
    __slots__ = ("receive", "received", "scope", "timeout_seconds")

    def __init__(self, scope: Scope, receive: Receive, timeout_seconds: float) -> None:
        self.scope = scope
        self.receive = receive
        self.timeout_seconds = timeout_seconds  # for its body to arrive whole
        self.received = 0  # the body's bytes read so far

    @property
    def method(self) -> str:
        return str(self.scope["method"])

    def headers(self) -> list[tuple[str, str]]:
        return [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in self.scope["headers"]
        ]

    async def body(self, limit: int, take: Callable[[int], None]) -> list[bytes]:
        """The body in pieces, refused as soon as it is known to be too large or too slow;
        ``take`` reserves each chunk's bytes in the namespace's budget before it is kept."""
        declared = header(self.scope, b"content-length")
        length = None if declared is None else whole_number(declared)
        if declared is not None and (length is None or length > limit):
            raise ProxyError("request_too_large", f"the request body exceeds {limit} bytes")
        # A declared length is reserved before anything is read, so a body over the budget is
        # refused before it costs anything.
        reserved = length or 0
        if not reserved and header(self.scope, b"transfer-encoding") is None:
            return []  # no body (HTTP/1.1 has one only with a length or a transfer coding)
        take(reserved)
        timeout_seconds = self.timeout_seconds
        pieces: list[bytes] = []
        small = bytearray()
        size = 0
        try:
            async with asyncio.timeout(timeout_seconds):
                more = True
                while more:
                    message = await self.receive()
                    if message["type"] == "http.disconnect":
                        raise AppWentAway
                    chunk: bytes = message.get("body", b"")
                    more = message.get("more_body", False)
                    size += len(chunk)
                    self.received = size
                    if size > limit:
                        raise ProxyError(
                            "request_too_large", f"the request body exceeds {limit} bytes"
                        )
                    if size > reserved:
                        take(size - reserved)
                        reserved = size
                    if small or len(chunk) < _PIECE_BYTES:
                        small += chunk
                        if len(small) >= _PIECE_BYTES:
                            pieces.append(bytes(small))
                            small.clear()
                    else:
                        pieces.append(chunk)
        except TimeoutError:
            # Closed, since the rest of the body may still be on its way.
            raise ProxyError(
                "request_timeout",
                f"the request body did not arrive within {timeout_seconds:g}s",
                headers={"Connection": "close"},
            ) from None
        if small:
            pieces.append(bytes(small))
        return pieces
