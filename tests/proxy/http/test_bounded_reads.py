"""A body read whole from its pieces, and refused, reading no further, once over its bound."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from gatehouse_proxy.http.bounded_reads import read_within


def test_a_body_in_pieces_is_read_whole_and_one_over_its_bound_no_further() -> None:
    taken: list[bytes] = []

    async def pieces(*parts: bytes) -> AsyncIterator[bytes]:
        for part in parts:
            taken.append(part)
            yield part

    async def run() -> None:
        assert await read_within(pieces(b'{"a"', b": 1", b"}"), 8) == b'{"a": 1}'
        assert await read_within(pieces(), 8) == b""
        taken.clear()
        assert await read_within(pieces(b"12345", b"6789", b"never read"), 8) is None
        assert taken == [b"12345", b"6789"]

    asyncio.run(run())
