"""A deadline for each request head: slowloris clients are disconnected, not waited for.

uvicorn waits for a request head without any limit, and any byte received cancels its keep-alive
timer, so a client that sends one header byte every few seconds holds a connection (and a file
descriptor) for as long as it likes. This protocol arms a timer whenever it waits for a head and
closes the connection if the whole head has not arrived when it fires. Bodies have their own
deadline in the app (answered 408), where a response can still be sent.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeadDeadlineProtocol(H11Protocol):
    head_timeout_seconds: float = 15.0
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._stop_waiting()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        """Arms the deadline when the connection waits for (the rest of) a request head."""
        if self._head_deadline is None and self.conn.their_state is h11.IDLE:
            self._head_deadline = self.loop.call_later(self.head_timeout_seconds, self._expired)

    def _stop_waiting(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _expired(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def with_head_deadline(seconds: float) -> type[H11Protocol]:
    """The protocol class for uvicorn's ``http=`` setting, with this deadline."""
    return type("HeadDeadlineProtocol", (HeadDeadlineProtocol,), {"head_timeout_seconds": seconds})
