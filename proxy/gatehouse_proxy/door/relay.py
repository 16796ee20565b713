"""The upstream's answer relayed to the app: filtered headers, a scrubbed body, cut off cleanly.

Most answers are whole in the proxy's buffer by the time their headers are read (a small JSON
body comes in the same packets). Such an answer is scrubbed whole and goes out with its length in
two writes, not as a chunked stream of three, and with no task watching for the app to leave:
nothing is left to wait for.

A longer answer is streamed, and so is one being decoded (compressed though identity was asked
for: what it inflates to is known only a step at a time): the status and headers go out before
the body has arrived, so a failure half-way through (a body of unknown length crossing the cap,
an upstream that breaks off or stalls) can no longer become an error response. The stream then
ends without its final chunk: the server closes the connection and the app sees a broken
response, never a silently short one. Meanwhile a task waits for the app to go away, so that an
app that hangs up stops the upstream read at once instead of at its timeout.

Every relayed answer has one Content-Type, the type a browser reads in the upstream's (the one
checked against the connection's allowed types; none where none parses), and
``X-Content-Type-Options: nosniff``, with or without allowed types: app code that hands the answer
to a browser gets the type that was checked, and the browser uses it rather than sniffing the
vendor's body for HTML or script (with no type at all, MIME Sniffing then never finds a scriptable
one).

The cut is reported once, through ``on_cut`` (a log line and a metric), not as a traceback from
the server, and its code is kept (``cut_code``), as the body's bytes sent are (``sent_bytes``),
for the request's record. ``on_end`` runs when the relay is over, however it ended: the
request's place under its tenant's caps is freed there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from starlette.types import Receive, Scope, Send

from gatehouse_contract.redaction import Redactor, scrubbed
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rules import headers as header_policy
from gatehouse_proxy.upstream.forwarder import Upstream

# Answers that carry no body, whatever the upstream says of its length.
_BODILESS = frozenset({204, 304})


class RelayedResponse:
    def __init__(
        self,
        upstream: Upstream,
        redact: Redactor | None,
        whole: bytes | None,
        standing: list[tuple[bytes, bytes]],
        on_cut: Callable[[ProxyError], None],
        on_end: Callable[[], None],
    ) -> None:
        self.upstream = upstream
        self.redact = redact
        self.whole = whole
        self.on_cut = on_cut
        self.on_end = on_end
        self.status_code = upstream.status
        self.sent_bytes = 0
        self.cut_code = ""
        relayed = header_policy.app_response_headers(
            upstream.headers(), redact, media_type=upstream.media_type
        )
        # The proxy's RateLimit-* fields (where the app stands in its quota) stand in for the
        # upstream's of the same names; the vendor's X-RateLimit-* pass as they are.
        own = {name for name, _ in standing}
        self.headers = [
            *standing,
            # A browser the app hands the answer to takes its one Content-Type as it is (or, with
            # none, never reads it as HTML or script): it does not sniff the vendor's body.
            (b"x-content-type-options", b"nosniff"),
            *(
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in relayed
                if not standing or name.encode("latin-1") not in own
            ),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if self.whole is not None:
                await self._send_whole(self.whole, scope["method"], send)
            else:
                await self._stream(receive, send)
        except ProxyError as error:
            self.cut_code = error.code
            self.on_cut(error)
        finally:
            # Also when the app went away mid-body and the body was never read to its end.
            self.upstream.release()
            self.on_end()

    async def _send_whole(self, body: bytes, method: str, send: Send) -> None:
        if self.redact is not None:
            body = self.redact(body)
        headers = self.headers
        if method != "HEAD" and self.status_code not in _BODILESS:
            headers = [*headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        self.sent_bytes = len(body)

    async def _stream(self, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.headers}
        )
        relay = asyncio.ensure_future(self._send_body(send))
        gone = asyncio.ensure_future(_app_gone(receive))
        try:
            await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (relay, gone):
                task.cancel()
            await asyncio.gather(relay, gone, return_exceptions=True)
        if not relay.cancelled():
            relay.result()  # a cut (ProxyError) is raised here

    async def _send_body(self, send: Send) -> None:
        body = self.upstream.body()
        async for chunk in body if self.redact is None else scrubbed(body, self.redact):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            self.sent_bytes += len(chunk)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _app_gone(receive: Receive) -> None:
    """Returns when the app has hung up. The request's body was read before the upstream call;
    a bodiless request's one empty message, never asked for, is passed over here."""
    with contextlib.suppress(OSError):
        while (await receive())["type"] != "http.disconnect":
            pass
