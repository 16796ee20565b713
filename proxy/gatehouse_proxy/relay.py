"""The upstream's answer relayed to the app: filtered headers, a scrubbed body, cut off cleanly.

The status and headers go out before the body has arrived, so a failure half-way through (a body
of unknown length crossing the cap, an upstream that breaks off or stalls) can no longer become an
error response. The stream then ends without its final chunk: the server closes the connection
and the app sees a broken response, never a silently short one. The cut is reported once, through
``on_cut`` (a log line and a metric), not as a traceback from the server. ``on_end`` runs when
the relay is over, however it ended: the request's place under its tenant's caps is freed there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from starlette.responses import StreamingResponse
from starlette.types import Send

from gatehouse_contract.redaction import scrubbed
from gatehouse_proxy import headers as header_policy
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.forwarder import Upstream


class RelayedResponse(StreamingResponse):
    def __init__(
        self,
        upstream: Upstream,
        secrets: Sequence[str],
        on_cut: Callable[[ProxyError], None],
        on_end: Callable[[], None],
    ) -> None:
        body = upstream.body()
        super().__init__(
            scrubbed(body, secrets) if secrets else body,
            status_code=upstream.status,
            headers=dict(header_policy.app_response_headers(upstream.headers(), secrets)),
        )
        self.upstream = upstream
        self.on_cut = on_cut
        self.on_end = on_end

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        except ProxyError as error:
            self.on_cut(error)
        finally:
            # Also when the app went away mid-body and the body was never read to its end.
            self.upstream.release()
            self.on_end()
