"""Keeping injected credentials out of what goes back to apps and into test results.

An upstream may echo the credential the proxy injected: in an error message, a request dump, a
next-page URL that carries an API key in its query, an HTML error page, a base64 blob. A body is
scrubbed as it streams, in two passes over each chunk (with a carry-over as long as the longest
form, so a value split across chunks is caught too):

1. Literal forms, replaced at memory speed: the value as sent (also with ``+`` for a space), and
   its base64 and base64url encodings at each of the three alignments it can have inside a longer
   base64 string (for values of 8 bytes or more, so short values do not blank unrelated base64).
2. Escaped forms, only where the chunk holds an escape of a character the value contains:
   ``%XX`` (either hex case), JSON ``\\uXXXX``, ``\\/``, ``\\"`` and ``\\\\``, HTML ``&#NN;``,
   ``&#xHH;`` and the named entities of URL characters are decoded to a canonical text, the value
   is looked for there (also with ``+`` for a space), and what it spans in the original is
   replaced. Any mix of escaped and plain characters is caught, since matching follows decoding.

Headers go through the same code (:class:`Redactor`), so no pattern is compiled per secret.
"""

from __future__ import annotations

import binascii
import bisect
import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass

REDACTED = "[redacted]"
_REDACTED_BYTES = REDACTED.encode()
_NAMED = {
    b"amp": "&",
    b"lt": "<",
    b"gt": ">",
    b"quot": '"',
    b"apos": "'",
    b"sol": "/",
    b"plus": "+",
    b"equals": "=",
    b"percnt": "%",
    b"num": "#",
    b"quest": "?",
    b"colon": ":",
}
_NAMED_BY_CHAR = {char: name for name, char in _NAMED.items()}
# The longest escape of one byte of a value: "&#0000065;" (a multi-byte character's escapes are
# never longer per byte).
_LONGEST_ESCAPE = 10
_MIN_BASE64_SOURCE = 8


@functools.lru_cache(maxsize=4096)
def _decoded(escape: bytes) -> bytes:
    if escape[0] == 0x25:  # %XX: one byte, whatever it is
        return bytes([int(escape[1:3], 16)])
    if escape[0] == 0x5C:  # backslash
        if escape[1] != 0x75:  # \" \\ \/
            return escape[1:2]
        units = [int(escape[i : i + 4], 16) for i in range(2, len(escape), 6)]
        if len(units) == 2:
            return chr(0x10000 + ((units[0] - 0xD800) << 10) + units[1] - 0xDC00).encode()
        return chr(units[0]).encode("utf-8", "surrogatepass")
    body = escape[1:-1]
    if body[:1] != b"#":
        return _NAMED[body].encode()
    code = int(body[2:], 16) if body[1:2] in b"xX" else int(body[1:])
    return chr(code).encode("utf-8", "surrogatepass") if code <= 0x10FFFF else escape


def _hex(value: int, digits: int) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in f"{value:0{digits}X}")


def _escapes_of(char: str) -> list[str]:
    """Patterns for every escape of one character that the redactor decodes."""
    code = ord(char)
    patterns = ["".join("%" + _hex(byte, 2) for byte in char.encode())]
    if code > 0xFFFF:
        high, low = divmod(code - 0x10000, 0x400)
        patterns.append(rf"\\u{_hex(0xD800 + high, 4)}\\u{_hex(0xDC00 + low, 4)}")
    else:
        patterns.append(rf"\\u{_hex(code, 4)}")
    patterns += [f"&#0{{0,3}}{code};", f"&#[xX]0{{0,3}}{_hex(code, 1)};"]
    if char in '"\\/':
        patterns.append(re.escape("\\" + char))
    if char in _NAMED_BY_CHAR:
        patterns.append(f"&{_NAMED_BY_CHAR[char].decode()};")
    return patterns


@functools.lru_cache(maxsize=256)
def _escape_pattern(chars: str) -> re.Pattern[bytes]:
    """Escapes of the given characters only: escapes of anything else cannot be part of a
    secret, and skipping them keeps escape-heavy bodies (JSON, HTML) fast. Cached by the set of
    characters, never by a secret."""
    return re.compile("|".join(p for char in chars for p in _escapes_of(char)).encode())


_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def _base64_cores(value: bytes) -> set[bytes]:
    """The part of base64(prefix + value + suffix) that depends on value alone, for each of the
    three prefix lengths modulo 3."""
    cores: set[bytes] = set()
    for pad in range(3):
        encoded = binascii.b2a_base64(bytes(pad) + value, newline=False)
        core = encoded[-(-8 * pad // 6) : (8 * (pad + len(value))) // 6]
        cores.add(core)
        cores.add(core.translate(_URL_SAFE))
    return cores


def _plain_forms(secret: str) -> set[bytes]:
    """The value, and with ``+`` for each space as form encoding writes it."""
    return {secret.encode(), secret.replace(" ", "+").encode()}


def _literal_forms(secret: str) -> set[bytes]:
    value = secret.encode()
    return _plain_forms(secret) | (
        _base64_cores(value) if len(value) >= _MIN_BASE64_SOURCE else set()
    )


class _Segments:
    """Where each piece of a canonical text came from in the original: literal runs map byte for
    byte, an escape maps as a whole."""

    def __init__(self, data: bytes, escapes: re.Pattern[bytes]) -> None:
        self.canonical_starts: list[int] = []
        self.spans: list[tuple[int, int, bool]] = []  # original start, end, is an escape
        pieces: list[bytes] = []
        canonical = 0
        position = 0
        for match in escapes.finditer(data):
            if match.start() > position:
                self._add(canonical, position, match.start(), False)
                pieces.append(data[position : match.start()])
                canonical += match.start() - position
            decoded = _decoded(match[0])
            self._add(canonical, match.start(), match.end(), True)
            pieces.append(decoded)
            canonical += len(decoded)
            position = match.end()
        self._add(canonical, position, len(data), False)
        pieces.append(data[position:])
        self.text = b"".join(pieces)

    def _add(self, canonical: int, start: int, end: int, escape: bool) -> None:
        self.canonical_starts.append(canonical)
        self.spans.append((start, end, escape))

    def original(self, canonical: int, *, end: bool) -> int:
        index = bisect.bisect_right(self.canonical_starts, canonical) - 1
        if end and index > 0 and self.canonical_starts[index] == canonical:
            index -= 1  # an end that falls on a boundary belongs to the piece before it
        start, stop, escape = self.spans[index]
        offset = canonical - self.canonical_starts[index]
        if escape:
            return stop if end else start
        return start + offset


def _redact_escaped(data: bytes, values: list[bytes], escapes: re.Pattern[bytes]) -> bytes:
    if not any(introducer in data for introducer in (b"%", b"\\", b"&")):
        return data
    # Decoded once without bookkeeping: the common answer is "no secret here".
    canonical = escapes.sub(lambda match: _decoded(match[0]), data)
    if not any(value in canonical for value in values):
        return data
    segments = _Segments(data, escapes)
    spans: list[tuple[int, int]] = []
    for value in values:
        at = segments.text.find(value)
        while at >= 0:
            spans.append(
                (
                    segments.original(at, end=False),
                    segments.original(at + len(value), end=True),
                )
            )
            at = segments.text.find(value, at + len(value))
    out: list[bytes] = []
    position = 0
    for start, end in sorted(spans):
        if end <= position:
            continue
        out += [data[position : max(start, position)], _REDACTED_BYTES]
        position = end
    out.append(data[position:])
    return b"".join(out)


class Redactor:
    """Every form of the given secrets, ready to scrub bytes."""

    def __init__(self, secrets: Iterable[str]) -> None:
        kept = {secret for secret in secrets if secret}
        self.values = sorted(
            {form for secret in kept for form in _plain_forms(secret)}, key=len, reverse=True
        )
        forms = {form for secret in kept for form in _literal_forms(secret)}
        # Longest first, so a longer form is replaced whole before a shorter one inside it.
        self.literal = sorted(forms, key=len, reverse=True)
        self.escapes = _escape_pattern(
            "".join(sorted({char for value in self.values for char in value.decode()}))
        )
        longest = max((len(value) for value in self.values), default=0)
        self.longest_form = max(
            [longest * _LONGEST_ESCAPE, *(len(form) for form in self.literal)], default=1
        )

    def __call__(self, data: bytes) -> bytes:
        for form in self.literal:
            data = data.replace(form, _REDACTED_BYTES)
        return _redact_escaped(data, self.values, self.escapes) if self.values else data

    def text(self, text: str) -> str:
        return self(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")


def scrub(text: str, secrets: Iterable[str]) -> str:
    return Redactor(secrets).text(text)


class BodyScrubber:
    """Scrubs a body chunk by chunk; ``feed`` each chunk, then ``flush`` the rest."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.keep = self.redact.longest_form - 1
        self.carry = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self.redact(self.carry + chunk)
        # The tail may hold the start of a secret that the next chunk completes.
        cut = max(len(data) - self.keep, 0)
        self.carry = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        rest, self.carry = self.carry, b""
        return rest


async def scrubbed(chunks: AsyncIterator[bytes], redact: Redactor) -> AsyncIterator[bytes]:
    scrubber = BodyScrubber(redact)
    async for chunk in chunks:
        out = scrubber.feed(chunk)
        if out:
            yield out
    rest = scrubber.flush()
    if rest:
        yield rest


@dataclass(frozen=True)
class Prefix:
    """The beginning of a body, scrubbed; ``size`` is the whole body's."""

    data: bytes
    size: int
    whole: bool


async def scrubbed_prefix(
    chunks: AsyncIterator[bytes],
    redact: Redactor,
    limit: int,
    pace: Callable[[], Awaitable[None]],
) -> Prefix:
    """At most ``limit`` bytes of the body, scrubbed, for a reader that shows only its start.

    The rest is read and counted, never kept or scrubbed: what the body costs past ``limit`` is
    the reading alone, whatever it holds. ``pace`` is awaited before each chunk scrubbed (the
    tenant's turn), since scrubbing an escape-heavy chunk is the costly part.
    """
    scrubber = BodyScrubber(redact)
    kept: list[bytes] = []
    kept_bytes = 0
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if kept_bytes < limit:
            await pace()
            out = scrubber.feed(chunk)
            kept.append(out)
            kept_bytes += len(out)
    # Everything fed came out only if the scrubber's carry is still within the limit.
    whole = kept_bytes < limit
    if whole:
        kept.append(scrubber.flush())
    data = b"".join(kept)
    return Prefix(data[:limit], size, whole and len(data) <= limit)
