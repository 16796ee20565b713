"""A deadline for each request head: slowloris clients are disconnected, not waited for.

uvicorn waits for a request head without any limit, and any byte received cancels its keep-alive
timer, so a client that sends one header byte every few seconds holds a connection (and a file
descriptor) for as long as it likes. This protocol arms a timer whenever it waits for a head and
closes the connection if the whole head has not arrived when it fires. Bodies have their own
deadline in the app (answered 408), where a response can still be sent.

It is uvicorn's httptools protocol (llhttp, in C): parsing a request costs a fraction of what
h11's pure-Python parser does, and a burst of a hundred requests is parsed in one iteration of the
event loop, before anything can tell whose they are.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeadDeadlineProtocol(HttpToolsProtocol):
    head_timeout_seconds: float = 15.0
    _head_deadline: asyncio.TimerHandle | None = None
    # A head is awaited while every head received has been answered (pipelined heads count).
    _heads = 0
    _answers = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def on_headers_complete(self) -> None:
        self._heads += 1
        self._stop_waiting()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        self._answers += 1
        super().on_response_complete()
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _awaiting_head(self) -> bool:
        return self._heads == self._answers and not self.transport.is_closing()

    def _await_head(self) -> None:
        if self._head_deadline is None and self._awaiting_head():
            self._head_deadline = self.loop.call_later(self.head_timeout_seconds, self._expired)

    def _stop_waiting(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _expired(self) -> None:
        self._head_deadline = None
        if self._awaiting_head():
            self.transport.close()


def with_head_deadline(seconds: float) -> type[HttpToolsProtocol]:
    """The protocol class for uvicorn's ``http=`` setting, with this deadline."""
    return type("HeadDeadlineProtocol", (HeadDeadlineProtocol,), {"head_timeout_seconds": seconds})
