"""Injected credentials are scrubbed from what upstreams send back, even split across chunks."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest

from gatehouse_proxy.redaction import REDACTED, BodyScrubber, scrub, scrubbed

SECRET = "sk live/42"  # a space and a slash: its URL-encoded form differs


def _stream(body: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


def _scrub_chunks(chunks: list[bytes]) -> bytes:
    scrubber = BodyScrubber([SECRET])
    return b"".join([scrubber.feed(chunk) for chunk in chunks] + [scrubber.flush()])


BODY = f'{{"echo": "{SECRET}", "next": "/v1?key=sk%20live%2F42&page=2"}}'.encode()
EXPECTED = b'{"echo": "[redacted]", "next": "/v1?key=[redacted]&page=2"}'


@pytest.mark.parametrize("cut", range(1, len(BODY)))
def test_a_secret_split_anywhere_is_scrubbed(cut: int) -> None:
    assert _scrub_chunks(_stream(BODY, [cut])) == EXPECTED


def test_byte_by_byte_and_whole() -> None:
    assert _scrub_chunks([bytes([b]) for b in BODY]) == EXPECTED
    assert _scrub_chunks([BODY]) == EXPECTED


def test_percent_encoding_in_either_hex_case_and_plus_for_space() -> None:
    assert scrub("k=sk+live%2f42 k=sk%20live%2F42", [SECRET]) == f"k={REDACTED} k={REDACTED}"


def test_json_escaped_forms_are_scrubbed() -> None:
    secret = 'a"b\\c'
    assert scrub('{"k": "a\\"b\\\\c"}', [secret]) == f'{{"k": "{REDACTED}"}}'


def test_other_bytes_pass_unchanged_and_nothing_is_lost() -> None:
    body = bytes(range(256)) * 40
    assert _scrub_chunks(_stream(body, [1, 7, 300, 5000])) == body


def test_the_async_stream() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for chunk in _stream(BODY, [5, 17, 18, 40]):
            yield chunk

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in scrubbed(chunks(), [SECRET])])

    assert asyncio.run(collect()) == EXPECTED
