"""Reading a whole body that arrives in pieces, up to a bound: what a token endpoint, an issuer's
key set or EKS Pod Identity's agent answers. A body may be split anywhere on the wire (chunked,
or headers and body in separate packets), so one read is never the whole of it; reading stops as
soon as the bound is passed, so a peer cannot make the proxy hold more."""

from __future__ import annotations

from collections.abc import AsyncIterable


async def read_within(pieces: AsyncIterable[bytes], limit: int) -> bytes | None:
    """The body ``pieces`` make, or None once it is over ``limit`` bytes (read no further)."""
    body = bytearray()
    async for piece in pieces:
        body += piece
        if len(body) > limit:
            return None
    return bytes(body)
