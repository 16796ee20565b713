"""What servers read from a request's query and body as its parameters, held to the connection.

Frameworks take parameters from the query and the body alike, so an app could say there what the
connection does not allow:

- **A method override.** A ``_method`` parameter turns a POST into the method it names:
  Rack::MethodOverride (Rails, Sinatra: the form body), Symfony and Laravel (the form body, then
  the query; Laravel's input is a JSON body too), Express's method-override (the query, or
  ``req.body._method``; an array's first element), Spring's HiddenHttpMethodFilter
  (``getParameter``: the query or the form body). One whose value is not a method the connection
  allows is refused, 405 ``method_not_allowed``; an override to an allowed method passes. (The
  header overrides, ``X-HTTP-Method-Override`` and kin, are dropped with the routing headers.)
- **The credential's name.** PHP's ``$_REQUEST``, Rails' ``params``, Laravel's ``input()`` and
  Spring's ``getParameter`` merge the body's fields with the query's, so a body field named as
  the query parameter the proxy injects the API key as could stand in for it: refused, 400
  ``invalid_body``.

Names are read as :mod:`gatehouse_proxy.query` reads a query's (every parser's reading, folded).
The body is read as its Content-Type says, as the servers do: ``x-www-form-urlencoded`` (pairs,
as in a query), ``multipart/...`` (each part's name: ``name=``, RFC 7578's ``name*=``, and RFC 2047
encoded words, which Commons FileUpload decodes), and any type with ``json`` in it (the top-level
object's keys, which Laravel and Rails merge; the keys of nested objects are data). A charset that
is not ASCII-compatible (UTF-16...) is decoded first, and so is JSON that RFC 4627's detection finds
in UTF-16 or UTF-32. Express's body-parser inflates a compressed body, so a ``gzip`` or
``deflate`` one is inflated (to 10 MiB at most, the largest body a connection allows) and read;
one in another coding cannot be read, and is refused.

Cost: a request whose body has none of those types costs nothing here; one that has is first
looked at as bytes, in C (is there an escape, a character beyond ASCII, or the letters of a
name?), and parsed only when a name may be in it. A body over 64 KiB (or compressed) is looked at
in a worker thread, never on the event loop. JSON is walked for its top level with one regular
expression (strings and brackets), never built into objects, and multipart bodies are searched
for their delimiters in place.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import codecs
import json
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from gatehouse_contract.header_names import canonical_name
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.query import Names, key_names

_OVERRIDE = Names([b"_method"])
# Bodies larger than this are looked at in a worker thread.
_THREAD_BYTES = 64 * 1024
# The largest body a connection may allow (limits.maxRequestBytes): a compressed body is read up
# to this once inflated.
MAX_INFLATED_BYTES = 10 * 1024 * 1024
# How much of a part's headers, and of a _method part's value, is read.
_PART_HEADER_BYTES = 64 * 1024
_VALUE_BYTES = 64
# Where two pieces of a body meet, this much of each is looked at together: more than a name's
# letters (an API key's name has at most 256 characters).
_SEAM_BYTES = 512

_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_COLON = re.compile(rb"[ \t\r\n]*:[ \t\r\n]*")
_JSON_ABSENT = re.compile(rb"null|false")
_BOUNDARY = re.compile(r'boundary\s*=\s*(?:"([^"]+)"|([^;\s]+))', re.IGNORECASE)
_CHARSET = re.compile(r'charset\s*=\s*"?([^";\s]+)', re.IGNORECASE)
# Every name parameter of a part's headers (a "name" that is not the end of "filename").
_PART_NAME = re.compile(
    rb'(?:^|[;\s])name(\*?)[ \t]*=[ \t]*("(?:[^"\\]|\\.)*"|[^;\s]*)', re.IGNORECASE
)
_ENCODED_WORD = re.compile(rb"=\?([^?]+)\?([BbQq])\?([^?]*)\?=")
_QUOTED_ESCAPE = re.compile(rb"\\(.)")
_INFLATABLE = {"gzip": 47, "x-gzip": 47, "deflate": 15}  # zlib wbits: 47 reads gzip or zlib


def check_query(raw: bytes, allowed_methods: frozenset[str]) -> None:
    """Refuses a query whose ``_method`` names a method the connection does not allow."""
    if raw.isascii() and b"%" not in raw and not _OVERRIDE.may_be_in(raw):
        return
    for value in _OVERRIDE.pairs_in(raw):
        _check_override(_form_values(value), allowed_methods)


async def check_body(
    headers: Sequence[tuple[str, str]],
    pieces: Sequence[bytes],
    allowed_methods: frozenset[str],
    key_parameter: str | None,
) -> None:
    """Refuses a body with a ``_method`` the connection does not allow, or (``key_parameter``:
    the query parameter the API key is injected as) a field named as the key."""
    if not pieces:
        return
    kind = _BodyKind.of(headers)
    if kind is None:
        return
    rules = _Rules(allowed_methods, key_names(key_parameter) if key_parameter else None)
    if kind.codings or sum(len(piece) for piece in pieces) > _THREAD_BYTES:
        await asyncio.to_thread(rules.check, kind, pieces)
    else:
        rules.check(kind, pieces)


@dataclass(frozen=True)
class _BodyKind:
    """How servers read a body: as a form, multipart, JSON (or several, for a request that says
    more than one Content-Type), in which charset, after which content codings."""

    form: bool
    multipart: tuple[bytes, ...]  # the boundaries
    json: bool
    charsets: tuple[str, ...]
    codings: tuple[str, ...]

    @staticmethod
    def of(headers: Sequence[tuple[str, str]]) -> _BodyKind | None:
        types: list[str] = []
        codings: list[str] = []
        for name, value in headers:
            canonical = canonical_name(name)
            if canonical == "content-type":
                types.append(value)
            elif canonical == "content-encoding":
                codings += [coding.strip().lower() for coding in value.split(",")]
        lowered = [value.lower() for value in types]
        form = any("x-www-form-urlencoded" in value for value in lowered)
        json_body = any("json" in value for value in lowered)
        boundaries = tuple(
            (found[1] or found[2]).encode("latin-1")
            for value in types
            if "multipart/" in value.lower() and (found := _BOUNDARY.search(value))
        )
        if not (form or json_body or boundaries):
            return None
        charsets = tuple(found[1] for value in types if (found := _CHARSET.search(value)))
        return _BodyKind(
            form,
            boundaries,
            json_body,
            charsets,
            tuple(coding for coding in codings if coding and coding != "identity"),
        )


@dataclass(frozen=True)
class _Rules:
    allowed_methods: frozenset[str]
    key: Names | None

    @property
    def _watched(self) -> tuple[Names, ...]:
        return (_OVERRIDE, self.key) if self.key else (_OVERRIDE,)

    def check(self, kind: _BodyKind, pieces: Sequence[bytes]) -> None:
        if kind.codings:
            pieces = [_inflated(pieces, kind.codings)]
        for body in _transcoded(pieces, kind.charsets, kind.json):
            if kind.form:
                self._check_form(body)
            for boundary in kind.multipart:
                self._check_multipart(body, boundary)
            if kind.json:
                self._check_json(body)

    def _refuse_key(self) -> None:
        raise ProxyError(
            "invalid_body",
            "the body has a field named as the query parameter this connection's API key is "
            "sent as: servers merge body fields with the query's, so the proxy refuses it",
        )

    def _may_hold_names(self, body: Sequence[bytes], escapes: tuple[bytes, ...]) -> bool:
        """The first look, on the bytes: an escape, a character beyond ASCII, or the letters of
        a name (one split across two pieces is seen where they meet)."""
        for index, piece in enumerate(body):
            seam = body[index - 1][-_SEAM_BYTES:] + piece[:_SEAM_BYTES] if index else b""
            for text in (piece, seam):
                if not text.isascii() or any(escape in text for escape in escapes):
                    return True
                if any(names.may_be_in(text) for names in self._watched):
                    return True
        return False

    def _check_form(self, body: Sequence[bytes]) -> None:
        if not self._may_hold_names(body, (b"%",)):
            return
        joined = b"".join(body)
        for value in _OVERRIDE.pairs_in(joined):
            _check_override(_form_values(value), self.allowed_methods)
        if self.key is not None and any(True for _ in self.key.pairs_in(joined)):
            self._refuse_key()

    def _check_multipart(self, body: Sequence[bytes], boundary: bytes) -> None:
        for headers, value in _Pieces(body).parts(b"--" + boundary):
            for name in _part_names(headers):
                if _OVERRIDE.reads_decoded_as(name):
                    _check_override([value()], self.allowed_methods)
                if self.key is not None and self.key.reads_decoded_as(name):
                    self._refuse_key()

    def _check_json(self, body: Sequence[bytes]) -> None:
        if not self._may_hold_names(body, (b"\\u",)):
            return
        joined = b"".join(body)
        for key, after in _top_level_keys(joined):
            plain = key.isascii() and b"\\" not in key
            if plain and not any(names.may_be_in(key) for names in self._watched):
                continue
            name = _json_text(key)
            if _OVERRIDE.reads_decoded_as(name):
                _check_override([_json_value(joined, after)], self.allowed_methods)
            if self.key is not None and self.key.reads_decoded_as(name):
                self._refuse_key()


def _check_override(values: list[bytes | None], allowed: frozenset[str]) -> None:
    """Refuses an override that any reading of its value makes a method not allowed; an empty
    one (or none) overrides nothing."""
    for value in values:
        if not value:
            continue
        method = value.decode("utf-8", "replace").strip().upper()
        if method not in allowed:
            shown = method if len(method) <= 32 else method[:31] + "…"
            raise ProxyError(
                "method_not_allowed",
                f"the request's _method parameter names {shown!r}, which is not a method "
                "allowed on this connection (frameworks take _method for the request's method)",
                headers={"Allow": ", ".join(sorted(allowed))},
            )


def _form_values(value: bytes | None) -> list[bytes | None]:
    """A form value as parsers read it: "+" as a space, or as itself."""
    if value is None:
        return [None]
    return [unquote_to_bytes(value.replace(b"+", b" ")), unquote_to_bytes(value)]


def _inflated(pieces: Sequence[bytes], codings: tuple[str, ...]) -> bytes:
    """The body with its content codings undone, the last applied first."""
    body = b"".join(pieces)
    for coding in reversed(codings):
        wbits = _INFLATABLE.get(coding)
        if wbits is None:
            raise ProxyError(
                "invalid_body",
                f"a form, multipart or JSON body in the content coding {coding!r} cannot be "
                "read by the proxy: send it uncompressed, or as gzip or deflate",
            )
        body = _inflate(body, wbits, coding)
    return body


def _inflate(body: bytes, wbits: int, coding: str) -> bytes:
    for bits in (wbits, -15) if coding == "deflate" else (wbits,):  # deflate: zlib or raw
        inflater = zlib.decompressobj(bits)
        try:
            out = inflater.decompress(body, MAX_INFLATED_BYTES + 1)
        except zlib.error:
            continue
        if len(out) > MAX_INFLATED_BYTES:
            raise ProxyError(
                "request_too_large",
                f"the {coding} body inflates beyond {MAX_INFLATED_BYTES} bytes, more than the "
                "proxy reads of a form, multipart or JSON body",
            )
        return out
    raise ProxyError("invalid_body", f"the body is not valid {coding}")


def _transcoded(
    pieces: Sequence[bytes], charsets: tuple[str, ...], json_body: bool
) -> list[Sequence[bytes]]:
    """The body as bytes, and as UTF-8 from each charset it may be in that is not
    ASCII-compatible (declared, or for JSON detected as RFC 4627 does)."""
    readings: list[Sequence[bytes]] = [pieces]
    names = set(charsets)
    if json_body and pieces:
        names.add(json.detect_encoding(pieces[0][:4]))
    for name in sorted(names):
        try:
            codec = codecs.lookup(name)
        except LookupError:
            continue
        if "=&;:_".encode(codec.name, "replace") == b"=&;:_":
            continue  # ASCII-compatible: the bytes are read as they are
        text = b"".join(pieces).decode(codec.name, "replace")
        readings.append([text.encode("utf-8", "surrogatepass")])
    return readings


def _top_level_keys(body: bytes) -> Iterator[tuple[bytes, int]]:
    """The keys of every top-level object (a JSON body, or each line of NDJSON), still escaped,
    with where their values start."""
    depth = 0
    in_object = False
    for token in _JSON_TOKEN.finditer(body):
        first = token[0][0]
        if first == 0x22:  # a string
            if depth == 1 and in_object and (colon := _JSON_COLON.match(body, token.end())):
                yield token[0], colon.end()
        elif first in b"[{":
            depth += 1
            if depth == 1:
                in_object = first == 0x7B
        else:
            depth = max(depth - 1, 0)


def _json_text(token: bytes) -> bytes:
    try:
        text = json.loads(token)
    except ValueError:
        return token.strip(b'"')
    return str(text).encode("utf-8", "surrogatepass")


def _json_value(body: bytes, start: int) -> bytes | None:
    """A top-level value as an override: a string's text, nothing for null or false, and for
    anything else its first bytes (no method, so refused)."""
    string = _JSON_STRING.match(body, start)
    if string:
        return _json_text(string[0])
    if _JSON_ABSENT.match(body, start):
        return None
    return body[start : start + _VALUE_BYTES] or None


def _part_names(headers: bytes) -> Iterator[bytes]:
    """Every name a part's headers give it, decoded as any server does: quoted (with PHP's
    backslash escapes), RFC 7578's name*=charset''escapes, RFC 2047 encoded words."""
    for found in _PART_NAME.finditer(headers):
        extended, value = found[1], found[2]
        if value.startswith(b'"') and value.endswith(b'"') and len(value) >= 2:
            value = value[1:-1]
            yield value
            value = _QUOTED_ESCAPE.sub(rb"\1", value)
        yield value
        if extended:
            charset, _, rest = value.partition(b"'")
            yield _decoded(unquote_to_bytes(rest.partition(b"'")[2]), charset)
        if b"=?" in value:
            yield _ENCODED_WORD.sub(_encoded_word, value)


def _encoded_word(found: re.Match[bytes]) -> bytes:
    charset, encoding, text = found[1], found[2].upper(), found[3]
    try:
        if encoding == b"B":
            raw = base64.b64decode(text + b"=" * (-len(text) % 4))
        else:
            raw = binascii.a2b_qp(text, header=True)
    except (binascii.Error, ValueError):
        return found[0]
    return _decoded(raw, charset)


def _decoded(raw: bytes, charset: bytes) -> bytes:
    try:
        return raw.decode(charset.decode("latin-1") or "utf-8", "replace").encode("utf-8")
    except LookupError:
        return raw


class _Pieces:
    """A body in the pieces it arrived in, searched without joining them."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self.pieces = pieces
        self.starts: list[int] = []
        offset = 0
        for piece in pieces:
            self.starts.append(offset)
            offset += len(piece)
        self.size = offset

    def find(self, needle: bytes, start: int, end: int | None = None) -> int:
        """The first position of ``needle`` at or after ``start`` (and ending by ``end``)."""
        end = self.size if end is None else min(end, self.size)
        index = self._index(start)
        while index < len(self.pieces) and self.starts[index] < end:
            piece, base = self.pieces[index], self.starts[index]
            found = piece.find(needle, max(start - base, 0), end - base)
            if found != -1:
                return base + found
            if index + 1 < len(self.pieces) and len(needle) > 1:
                # Where this piece and the next meet.
                seam_start = max(base + len(piece) - len(needle) + 1, start)
                seam = self.slice(seam_start, min(seam_start + 2 * len(needle) - 2, end))
                found = seam.find(needle)
                if found != -1:
                    return seam_start + found
            index += 1
        return -1

    def slice(self, start: int, end: int) -> bytes:
        parts = []
        index = self._index(start)
        while index < len(self.pieces) and self.starts[index] < end:
            base = self.starts[index]
            parts.append(self.pieces[index][max(start - base, 0) : end - base])
            index += 1
        return b"".join(parts)

    def _index(self, offset: int) -> int:
        return max(bisect.bisect_right(self.starts, offset) - 1, 0)

    def parts(self, delimiter: bytes) -> Iterator[tuple[bytes, _Value]]:
        """Each part's headers (up to 64 KiB of them) and its value, read on demand. Lenient as
        PHP is, and more: a part starts at every delimiter (the closing one too, for a server
        that reads on), its headers end at a blank line (CRLF or LF)."""
        at = self.find(delimiter, 0)
        while at != -1:
            start = at + len(delimiter)
            limit = start + _PART_HEADER_BYTES
            ends = [
                (found, len(blank))
                for blank in (b"\r\n\r\n", b"\n\n")
                if (found := self.find(blank, start, limit + len(blank))) != -1
            ]
            end, blank = min(ends) if ends else (limit, 0)
            following = self.find(delimiter, end + blank)
            yield self.slice(start, end), _Value(self, end + blank, following)
            at = following


@dataclass(frozen=True)
class _Value:
    """A part's value, up to 64 bytes (more is no method), without the line break before the
    next delimiter."""

    body: _Pieces
    start: int
    following: int

    def __call__(self) -> bytes:
        end = self.body.size if self.following == -1 else self.following
        value = self.body.slice(self.start, min(end, self.start + _VALUE_BYTES + 2))
        return value.removesuffix(b"\n").removesuffix(b"\r")
