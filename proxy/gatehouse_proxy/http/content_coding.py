"""Undoing an upstream's compression of its answer, within bounds, so that what it echoes of the
injected credential can be scrubbed.

A connection that injects a credential asks upstream for ``Accept-Encoding: identity``. An upstream
that compresses anyway, in ``Content-Encoding`` or as a transfer coding (``Transfer-Encoding:
gzip, chunked``, which aiohttp leaves as it is), has its answer decoded here: gzip (and x-gzip,
and several gzip members one after another) and deflate (zlib's format, or raw as some servers
send it), at most two stacked. The output comes in pieces of at most 64 KiB, each the work of one
bounded step, so that a small answer that inflates to megabytes (a bomb) costs its output a step
at a time, up to the connection's cap. Anything else (br, zstd, compress, a coding nobody knows,
three stacked) cannot be read here, so it is refused: the credential might be inside.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

from gatehouse_proxy.errors import ProxyError

DECODED = frozenset({"gzip", "x-gzip", "deflate"})
MAX_STACKED = 2
STEP = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
# IANA's HTTP content codings, named in a refusal; any other word is called "unknown".
_REGISTERED = DECODED | {"br", "zstd", "compress", "x-compress", "aes128gcm", "exi", "pack200-gzip"}


def codings(headers: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The codings applied to a body, in the order they were applied: its content codings, then
    its transfer codings other than chunked (which the HTTP client undid)."""
    content: list[str] = []
    transfer: list[str] = []
    for name, value in headers:
        lowered = name.lower()
        if lowered in ("content-encoding", "transfer-encoding"):
            tokens = [token.strip().lower() for token in value.split(",")]
            found = content if lowered == "content-encoding" else transfer
            found += [token for token in tokens if token not in ("", "identity", "chunked")]
    return (*content, *transfer)


def check(applied: tuple[str, ...]) -> None:
    """Refuses a body this module cannot decode. The message names registered codings only: a
    header's text is the upstream's, and might be the credential."""
    if len(applied) > MAX_STACKED:
        raise ProxyError(
            "unsupported_encoding",
            f"the upstream encoded its answer {len(applied)} times over; the proxy decodes at "
            f"most {MAX_STACKED} codings to keep the injected credential out of it",
        )
    if any(coding not in DECODED for coding in applied):
        named = ", ".join(coding if coding in _REGISTERED else "unknown" for coding in applied)
        raise ProxyError(
            "unsupported_encoding",
            f"the upstream compressed its answer ({named}) though the proxy asked for identity; "
            "only gzip and deflate can be decoded to keep the injected credential out of it",
        )


class _Layer:
    """One coding's decompressor. Deflate's format (zlib's, or raw) is told by its first two
    bytes, and a gzip member's start by its two magic bytes, so those are waited for."""

    def __init__(self, coding: str) -> None:
        self.gzip = coding != "deflate"
        self.stream: zlib._Decompress | None = None
        self.ended_streams = 0
        self.pending = b""
        self.fed = False
        self.ended = False  # past the last stream: the rest is never relayed

    def _start(self) -> None:
        """A decompressor for what is pending, once enough of it is there to tell which."""
        if len(self.pending) < 2:
            return
        first, second = self.pending[0], self.pending[1]
        if not self.gzip:
            wbits = 15 if first & 0x0F == 8 and (first << 8 | second) % 31 == 0 else -15
        elif self.ended_streams == 0 or self.pending.startswith(_GZIP_MAGIC):
            wbits = 31
        else:
            self.ended = True  # bytes after the last member
            return
        self.stream = zlib.decompressobj(wbits)

    def feed(self, data: bytes) -> Iterator[bytes]:
        self.fed = self.fed or bool(data)
        while not self.ended:
            if self.stream is not None and self.stream.eof:
                self.pending += self.stream.unused_data
                self.stream = None
                self.ended_streams += 1
                self.ended = not self.gzip
                continue
            if self.stream is None:
                self.pending += data
                self._start()
                if self.stream is None:
                    return
                data, self.pending = self.pending, b""
            elif not data and not self.stream.unconsumed_tail:
                # What the last step left inside the decompressor (it stopped at STEP with all
                # its input taken), then nothing more until more input comes.
                out = self.stream.decompress(b"", STEP)
                if not out:
                    return
                yield out
                continue
            out = self.stream.decompress(data or self.stream.unconsumed_tail, STEP)
            data = b""
            if out:
                yield out

    @property
    def complete(self) -> bool:
        """Nothing came, or the last stream started came to its end."""
        return not self.fed or self.ended or (self.stream is None and not self.pending)


class Decoder:
    """A body's codings undone, in the reverse order of their applying."""

    def __init__(self, applied: tuple[str, ...]) -> None:
        self.layers = [_Layer(coding) for coding in reversed(applied)]

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded bytes of ``data``, in pieces of at most :data:`STEP` bytes, each the work
        of one step (the caller may yield to other work between them)."""
        try:
            yield from self._through(data, 0)
        except zlib.error:
            raise ProxyError(
                "upstream_failed", "the upstream's compressed answer could not be decoded"
            ) from None

    def _through(self, data: bytes, index: int) -> Iterator[bytes]:
        if index == len(self.layers):
            yield data
            return
        for piece in self.layers[index].feed(data):
            yield from self._through(piece, index + 1)

    def end(self) -> None:
        """Raises if the body ended inside a compressed stream."""
        if not all(layer.complete for layer in self.layers):
            raise ProxyError("upstream_failed", "the upstream's compressed answer ended early")
