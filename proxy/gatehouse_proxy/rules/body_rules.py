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

Names are read as :mod:`gatehouse_proxy.rules.query` reads a query's (every parser's reading,
folded). The body is read as the upstream will read it: by the headers it will be sent with
(``headers.upstream_request_headers``: a connection's own ``Content-Type`` or ``Content-Encoding``
in place of the app's, whatever the app labelled its body), and two different types are refused.
It is read as its Content-Type says, as the servers do: ``x-www-form-urlencoded`` (pairs,
as in a query), ``multipart/...`` (each part's name: ``name=``, RFC 7578's ``name*=``, and RFC 2047
encoded words, which Commons FileUpload decodes), and any type with ``json`` in it (the top-level
object's keys, which Laravel and Rails merge; the keys of nested objects are data). A charset that
is not ASCII-compatible (UTF-16...) is decoded first, and so is JSON that RFC 4627's detection finds
in UTF-16 or UTF-32. Express's body-parser inflates a compressed body, so a ``gzip`` or
``deflate`` one is inflated (to 10 MiB at most, the largest body a connection allows) and read;
one in another coding cannot be read, and is refused.

Cost: a request whose body has none of those types costs nothing here; one that has is first
looked at as bytes, in C (is there an escape, a character beyond ASCII, or the letters of a
name?), and parsed only when a name may be in it. The event loop looks at bodies up to 32 KiB and
parses them up to 4 KiB (a millisecond at worst); anything larger, or compressed, is read in a
worker thread of this module's, one namespace's bodies at a time. JSON is walked for its
top-level object's keys with regular expressions (nested values skipped whole, in C), never built
into objects; multipart bodies are searched for their delimiters in place, not joined. What it
costs is measured by ``make bench`` (``BENCH_ONLY=bodies``, see ``gatehouse_dev.bench_bodies``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import codecs
import functools
import json
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

from gatehouse_contract.header_names import canonical_name
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rules.query import Names, escaped_name_in, key_names

_OVERRIDE = Names([b"_method"])
# A body up to this size is looked at on the event loop (a search of its bytes in C, well under
# a millisecond); a larger one in a worker thread.
_LOOK_HERE_BYTES = 32 * 1024
# A body that may hold a name is read (parsed) on the event loop up to this size: at worst about
# a millisecond (thousands of one-letter JSON keys or form fields); a larger one in a thread.
_READ_HERE_BYTES = 4 * 1024
# The largest body a connection may allow (limits.maxRequestBytes): a compressed body is read up
# to this once inflated.
MAX_INFLATED_BYTES = 10 * 1024 * 1024
# How much of a part's headers, and of a _method part's value, is read.
_PART_HEADER_BYTES = 64 * 1024
_VALUE_BYTES = 64
# Where two pieces of a body meet, this much of the first is looked at with the second: more
# than a name (an API key's name has at most 256 characters) and its escapes.
_SEAM_BYTES = 4096

_JSON_STRING_PATTERN = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_JSON_STRING = re.compile(_JSON_STRING_PATTERN, re.DOTALL)
_JSON_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*\{")
# Past anything else, the next string, opening bracket or closing bracket.
_JSON_NEXT = re.compile(
    rb'[^"\[\]{}]*+(?:(' + _JSON_STRING_PATTERN + rb")|([\[{])|[\]}])", re.DOTALL
)
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
    if not _OVERRIDE.may_name_a_pair_in(raw):
        return
    for value in _OVERRIDE.pairs_in(raw):
        _check_override(_form_values(value), allowed_methods)


async def check_body(
    namespace: str,
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
    size = sum(len(piece) for piece in pieces)
    if kind.codings or size > _LOOK_HERE_BYTES:
        await _READERS.run(namespace, rules.check, kind, pieces)
    elif rules.worth_reading(kind, pieces):
        if size <= _READ_HERE_BYTES:
            rules.read(kind, pieces)
        else:
            await _READERS.run(namespace, rules.read, kind, pieces)


class _Readers:
    """Worker threads that read bodies: a few, and one namespace's bodies one at a time, so a
    tenant sending bodies that are slow to read waits for its own (and the default executor,
    which signs Google token requests, stays free)."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="gatehouse-body-rules")
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}

    async def run(
        self, namespace: str, read: Callable[[_BodyKind, Sequence[bytes]], None], *args: Any
    ) -> None:
        lock, users = self._turns.get(namespace, (asyncio.Lock(), 0))
        self._turns[namespace] = (lock, users + 1)
        try:
            async with lock:
                await asyncio.get_running_loop().run_in_executor(self._pool, read, *args)
        finally:
            lock, users = self._turns[namespace]
            if users == 1:
                del self._turns[namespace]
            else:
                self._turns[namespace] = (lock, users - 1)


_READERS = _Readers(workers=4)


@dataclass(slots=True)
class _BodyKind:
    """How servers read a body: as a form, multipart, JSON (or several, for a type that names
    more than one), in which charset, after which content codings. A request with two different
    Content-Type headers (in any spelling of the name) is refused: servers take the first, the
    last or both joined, so which type the upstream reads cannot be told."""

    form: bool = False
    multipart: list[bytes] = field(default_factory=list)  # the boundaries
    json: bool = False
    charsets: list[str] = field(default_factory=list)
    codings: list[str] = field(default_factory=list)

    @staticmethod
    def of(headers: Sequence[tuple[str, str]]) -> _BodyKind | None:
        kind = _BodyKind()
        types: set[str] = set()
        for name, value in headers:
            if name[:7].lower() != "content":
                continue  # most headers, at the cost of a slice
            canonical = canonical_name(name)
            if canonical == "content-encoding":
                codings = (coding.strip().lower() for coding in value.split(","))
                kind.codings += [coding for coding in codings if coding not in ("", "identity")]
            if canonical != "content-type":
                continue
            types.add(value.strip())
            if len(types) > 1:
                raise ProxyError(
                    "invalid_body",
                    "the request has two different Content-Type headers: servers read either "
                    "(or both), so the proxy cannot tell how the upstream will read the body; "
                    "send one",
                )
            lowered = value.lower()
            kind.form = kind.form or "x-www-form-urlencoded" in lowered
            kind.json = kind.json or "json" in lowered
            if "multipart/" in lowered and (found := _BOUNDARY.search(value)):
                kind.multipart.append((found[1] or found[2]).encode("latin-1"))
            if "charset" in lowered and (found := _CHARSET.search(value)):
                kind.charsets.append(found[1])
        return kind if kind.form or kind.json or kind.multipart else None


@dataclass(frozen=True)
class _Rules:
    allowed_methods: frozenset[str]
    key: Names | None

    def check(self, kind: _BodyKind, pieces: Sequence[bytes]) -> None:
        if kind.codings or self.worth_reading(kind, pieces):
            self.read(kind, pieces)

    def worth_reading(self, kind: _BodyKind, pieces: Sequence[bytes]) -> bool:
        """The first look, on the bytes as they came: could a name be in there at all?"""
        if kind.charsets or (kind.json and _transcoding_for_json(pieces[0])):
            return True  # read once decoded
        if kind.multipart:
            return True  # the parts' names are read by searching for the delimiters, in C
        if kind.form and self._may_hold_names(pieces, escaped_name_in, b"&"):
            return True
        return (
            kind.json
            and _JSON_START.match(pieces[0]) is not None
            and self._may_hold_names(pieces, _json_escape_in, b"")
        )

    def read(self, kind: _BodyKind, pieces: Sequence[bytes]) -> None:
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

    def _may_hold_names(
        self, body: Sequence[bytes], escaped: Callable[[bytes], bool], start: bytes
    ) -> bool:
        """The first look, on the bytes: an escape, a character beyond ASCII, or a name's
        letters. Each piece of the body is looked at with the end of the one before (from its
        last ``start`` of a name, if there is one near), so a name split between them is seen."""
        before = b""
        for piece in body:
            text = before + piece
            if not text.isascii() or escaped(text):
                return True
            lowered = text.lower()
            if _OVERRIDE.may_be_in_lowered(lowered):
                return True
            if self.key is not None and self.key.may_be_in_lowered(lowered):
                return True
            before = piece[-_SEAM_BYTES:]
            if start and (cut := before.rfind(start)) != -1:
                before = before[cut:]
        return False

    def _check_form(self, body: Sequence[bytes]) -> None:
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
        joined = b"".join(body)
        key_names = self.key
        for key, after in _top_level_keys(joined):
            plain = key.isascii() and b"\\" not in key
            if plain and not (
                _OVERRIDE.may_be_in(key) or (key_names is not None and key_names.may_be_in(key))
            ):
                continue  # a plain key without a name's letters: most keys, cheaply
            name = _json_text(key)
            if _OVERRIDE.reads_decoded_as(name):
                _check_override([_json_value(joined, after)], self.allowed_methods)
            if key_names is not None and key_names.reads_decoded_as(name):
                self._refuse_key()


def _json_escape_in(text: bytes) -> bool:
    return b"\\u" in text


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


def _inflated(pieces: Sequence[bytes], codings: Sequence[str]) -> bytes:
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
    pieces: Sequence[bytes], charsets: Sequence[str], json_body: bool
) -> list[Sequence[bytes]]:
    """The body as bytes, and as UTF-8 from each charset it may be in that is not
    ASCII-compatible (declared, or for JSON detected as RFC 4627 does)."""
    readings: list[Sequence[bytes]] = [pieces]
    names = set(charsets)
    if json_body and (detected := _transcoding_for_json(pieces[0])):
        names.add(detected)
    for name in sorted(names):
        codec = _not_ascii_compatible(name)
        if codec is not None:
            text = b"".join(pieces).decode(codec, "replace")
            readings.append([text.encode("utf-8", "surrogatepass")])
    return readings


def _transcoding_for_json(first: bytes) -> str | None:
    """The encoding RFC 4627's detection finds for a JSON body in UTF-16 or UTF-32."""
    head = first[:4]
    if b"\0" in head or head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return json.detect_encoding(head)
    return None


@functools.lru_cache(maxsize=64)
def _not_ascii_compatible(charset: str) -> str | None:
    """The codec of a charset whose bytes are not ASCII's (UTF-16, UTF-32...); None for the
    others, and for charsets no codec knows (read as bytes, as servers that know none would)."""
    try:
        codec = codecs.lookup(charset).name
    except LookupError:
        return None
    return None if "=&;:_".encode(codec, "replace") == b"=&;:_" else codec


def _nested(levels: int) -> bytes:
    """An expression for a whole JSON array or object at most ``levels`` deep."""
    inner = rb"(?:[^\[\]{}\"]++|" + _JSON_STRING_PATTERN + rb")*+"
    for _ in range(levels - 1):
        inner = rb"(?:[^\[\]{}\"]++|" + _JSON_STRING_PATTERN + rb"|[\[{]" + inner + rb"[\]}])*+"
    return rb"[\[{]" + inner + rb"[\]}]"


# A nested value is skipped whole, in C, when it is at most this deep; deeper ones are walked.
_JSON_NESTED = re.compile(_nested(32), re.DOTALL)


def _top_level_keys(body: bytes) -> Iterator[tuple[bytes, int]]:
    """The keys of the top-level object, still escaped, with where their values start. Only an
    object's keys are parameters (an array, or anything after the object, is none)."""
    start = _JSON_START.match(body)
    if start is None:
        return
    depth = 1
    at = start.end()
    while (token := _JSON_NEXT.match(body, at)) is not None:
        at = token.end()
        if token[1] is not None:  # a string: a key where a colon follows at the top level
            if depth == 1 and (colon := _JSON_COLON.match(body, at)):
                yield token[1], colon.end()
        elif token[2] is not None:  # an opening bracket
            nested = _JSON_NESTED.match(body, token.start(2))
            if nested is not None:
                at = nested.end()
            else:
                depth += 1
        else:
            depth -= 1
            if depth == 0:
                return


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
            crlf = self.find(b"\r\n\r\n", start, limit + 4)
            lf = self.find(b"\n\n", start, (limit if crlf == -1 else crlf) + 2)
            if lf != -1:
                end, blank = lf, 2
            elif crlf != -1:
                end, blank = crlf, 4
            else:
                end, blank = limit, 0
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
