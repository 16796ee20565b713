"""What a connection may send before its request is known: a deadline and a size for each head,
and a bound on requests queued behind one another.

uvicorn waits for a request head without any limit, and any byte received cancels its keep-alive
timer, so a client that sends one header byte every few seconds holds a connection (and a file
descriptor) for as long as it likes. This protocol sets a deadline whenever it waits for a head
and closes the connection if the whole head has not arrived by then. Bodies have their own
deadline in the app (answered 408), where a response can still be sent. A connection's one timer
is armed once and moved on when it fires early (the deadline has moved since): arming and
cancelling a timer for each request of a kept-alive connection cost more than the rest of this
protocol.

It is uvicorn's httptools protocol (llhttp, in C): parsing a request costs a fraction of what
h11's pure-Python parser does, and a burst of a hundred requests is parsed in one iteration of the
event loop, before anything can tell whose they are. Unlike h11, uvicorn's httptools protocol
bounds neither a head's size nor how many pipelined requests it queues while one is answered
(llhttp parses a whole read at once), so both are bounded here: a head over ``MAX_HEAD_BYTES`` or
``MAX_HEADERS`` is answered 400 and the connection closed, as is a connection with more than
``MAX_PIPELINED`` requests waiting.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 16 * 1024  # what h11 allowed
MAX_HEADERS = 100
MAX_PIPELINED = 16


class HeadTooLarge(Exception):
    """Raised from a parser callback: uvicorn answers 400 and closes the connection."""


class HeadDeadlineProtocol(HttpToolsProtocol):
    head_timeout_seconds: float = 15.0
    # When the head awaited is due (the loop's clock), None while none is awaited; and the
    # connection's timer, which fires at that time or before it.
    _head_due: float | None = None
    _head_timer: asyncio.TimerHandle | None = None
    # A head is awaited while every head received has been answered (pipelined heads count).
    _heads = 0
    _answers = 0
    # The head being parsed: its size in callbacks (exact), and in the reads after the one it
    # began in (what httptools holds before a callback sees it).
    _in_head = False
    _head_began_in_this_read = False
    _head_bytes = 0
    _head_read_bytes = 0
    _header_count = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        # httptools gathers a header value across reads before any callback sees it, so a head
        # is also measured here, in whole reads: at most one read past the limit is parsed.
        if self._in_head and self._head_read_bytes > MAX_HEAD_BYTES:
            self.send_400_response("Request header fields too large.")
            return
        self._head_began_in_this_read = False
        super().data_received(data)
        if self._in_head and not self._head_began_in_this_read:
            self._head_read_bytes += len(data)

    def on_message_begin(self) -> None:
        self._in_head, self._head_began_in_this_read = True, True
        self._head_bytes = self._head_read_bytes = self._header_count = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > MAX_HEADERS:
            raise HeadTooLarge(f"more than {MAX_HEADERS} header fields")
        self._count(len(name) + len(value))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if len(self.pipeline) >= MAX_PIPELINED:
            raise HeadTooLarge(f"more than {MAX_PIPELINED} pipelined requests waiting")
        self._heads += 1
        self._stop_waiting()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        self._answers += 1
        super().on_response_complete()
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            raise HeadTooLarge(f"a request head over {MAX_HEAD_BYTES} bytes")

    def _awaiting_head(self) -> bool:
        return self._heads == self._answers and not self.transport.is_closing()

    def _await_head(self) -> None:
        if self._head_due is None and self._awaiting_head():
            self._head_due = self.loop.time() + self.head_timeout_seconds
            if self._head_timer is None:
                self._head_timer = self.loop.call_at(self._head_due, self._expired)

    def _stop_waiting(self) -> None:
        self._head_due = None

    def _expired(self) -> None:
        self._head_timer = None
        due = self._head_due
        if due is None:
            return  # no head awaited: armed again when one is
        if self.loop.time() < due:
            # A later head's deadline: the timer moves on to it.
            self._head_timer = self.loop.call_at(due, self._expired)
        elif self._awaiting_head():
            self._head_due = None
            self.transport.close()


def with_head_deadline(seconds: float) -> type[HttpToolsProtocol]:
    """The protocol class for uvicorn's ``http=`` setting, with this deadline."""
    return type("HeadDeadlineProtocol", (HeadDeadlineProtocol,), {"head_timeout_seconds": seconds})
