"""Keeping injected credentials out of what goes back to apps and into test results.

An upstream may echo the credential the proxy injected: in an error message, a request dump, a
next-page URL that carries an API key in its query, an HTML error page, a base64 blob, a hex dump.
A body is scrubbed as it streams (with a carry-over as long as the longest form, so a value split
across chunks is caught too). Each chunk is read in views, each a decoding of the one before,
whose matches are mapped back to the bytes they came from and replaced there:

1. The bytes as they are, for the value in UTF-16 (either byte order): replaced in place by
   ``[redacted]`` in UTF-16, so the rest of such a body still decodes.
2. Unwrapped: line breaks removed (CR, LF, JSON's ``\\r`` and ``\\n``) and JSON's ``\\/`` read as
   ``/``, then case folded. Here are looked for: the value (also with ``+`` for a space), its
   hex, and its base64 and base64url at each of the three alignments it can have inside a longer
   base64 string (values of 8 bytes or more, so short values do not blank unrelated base64). So
   wrapped base64 (MIME, PEM, any width) and hex in either or mixed case are caught. The same
   forms are looked for in the quoted-printable reading of the chunk (its soft line breaks, and
   its ``=XX`` escapes of the value's characters, read before line breaks go), a view of its own
   since an "=" also ends many a line and a base64 value, and begins many a query value.
3. Escapes decoded, only those of a character the value contains (which keeps escape-heavy bodies
   fast), one family at a time: ``%XX`` and ``%uXXXX``; JSON's ``\\uXXXX``, ``\\"``, ``\\\\``,
   ``\\/`` and ``\\xHH``; HTML's ``&#NN;`` and ``&#xHH;`` with any zero padding, also without the
   ``;`` (the digits end where a non-digit starts, as HTML parsers read them), and the named
   entities of URL characters (``&amp``, ``&lt``, ``&gt``, ``&quot`` also without ``;`` or in
   capitals). The value is looked for here too, so any mix of escaped and plain characters is
   caught.
4. Percent-encoded twice (a URL that embeds another URL: a ``return_to`` or ``self`` link
   echoing the request's own): ``%25XX`` read as the byte ``XX`` is, then the escapes of 3., and
   the value looked for again. A view of its own, since ``%25`` read once is a ``%`` that a value
   may hold as it is; read where the text holds ``%25`` and the longest run of the value's
   letters, digits and ``._-`` (which no percent-encoder escapes), when that run is 4 bytes or
   more (else wherever ``%25`` is), so that bodies full of ``%25`` stay fast.

The forms given are those a secret is sent in (:mod:`gatehouse_contract.sent_forms`: a query key
also percent-encoded, an OAuth 2.0 client secret also form-encoded and in its Basic pair's
base64). Each is looked for as it is, in hex and in base64 (2.); a form that is another's
percent-encoding reads as that other form in 3. and 4., which look for it there. So every form
sent is caught as sent and in one encoding more, and the secret percent-encoded twice.

Numeric character references padded with more than six zeros lose the extra zeros (the same
character to any reader), so every escape of a byte stays within a bounded length, and so does the
carry-over. Headers go through the same code (:class:`Redactor`), and a header value also loses any
piece of a value of :data:`FRAGMENT_BYTES` or more (a key cut in two over two headers). No pattern
is compiled per secret: the escape patterns are cached by the set of characters.
"""

from __future__ import annotations

import binascii
import bisect
import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

REDACTED = "[redacted]"
_REDACTED_BYTES = REDACTED.encode()
# A header value loses any piece of an injected value this long or longer.
FRAGMENT_BYTES = 8
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
# HTML reads these also without the ";" and in capitals (its legacy entities).
_LEGACY_NAMED = frozenset({b"amp", b"lt", b"gt", b"quot"})
_MAX_ZEROS = 6
_PADDING = re.compile(rb"(&#[xX]?0{%d})0+" % _MAX_ZEROS)
# The longest escape of one byte of a value, once padding is bounded: "&#000000126;" (a multi-byte
# character's escapes are never longer per byte); and the longest line break, JSON's "\r\n".
_LONGEST_ESCAPE = 12
_LONGEST_BREAK = 4
_MIN_BASE64_SOURCE = 8
_HEADER_SEPARATOR = b"\x1f"
_INTRODUCERS = (b"%", b"\\", b"&", b"=")


def _bytes_of(escape: bytes, width: int) -> bytes:
    """The bytes of a run of byte escapes (``%XX``, ``=XX``, ``\\xHH``), each ``width`` long."""
    return bytes(int(escape[at - 2 : at], 16) for at in range(width, len(escape) + 1, width))


def _character_of(units: list[int]) -> bytes:
    if len(units) == 2:
        return chr(0x10000 + ((units[0] - 0xD800) << 10) + units[1] - 0xDC00).encode()
    return chr(units[0]).encode("utf-8", "surrogatepass")


@functools.lru_cache(maxsize=4096)
def _decoded(escape: bytes) -> bytes:
    introducer, kind = escape[:1], escape[1:2]
    if introducer == b"%":
        if kind in b"uU":  # %uXXXX, a surrogate pair as two
            return _character_of([int(escape[at : at + 4], 16) for at in range(2, len(escape), 6)])
        return _bytes_of(escape, 3)
    if introducer == b"=":
        return b"" if kind in b"\r\n" else _bytes_of(escape, 3)  # a soft line break, or =XX
    if introducer == b"\\":
        if kind == b"u":
            return _character_of([int(escape[at : at + 4], 16) for at in range(2, len(escape), 6)])
        if kind == b"x":
            return _bytes_of(escape, 4)
        return kind  # \" \\ \/
    body = escape[1:].rstrip(b";")
    if body[:1] != b"#":
        return _NAMED[body.lower()].encode()
    code = int(body[2:], 16) if body[1:2] in b"xX" else int(body[1:])
    return chr(code).encode("utf-8", "surrogatepass")


def _units(char: str) -> list[int]:
    """The UTF-16 code units of a character."""
    code = ord(char)
    if code <= 0xFFFF:
        return [code]
    high, low = divmod(code - 0x10000, 0x400)
    return [0xD800 + high, 0xDC00 + low]


_Trie = dict[str, "_Trie"]


def _trie(words: Iterable[str]) -> str:
    """A pattern for any of the literal ``words``, their common beginnings shared: an alternation
    of whole words is tried word by word wherever its introducer occurs, a trie letter by letter."""
    root: _Trie = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: _Trie) -> str:
        branches = [
            re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char
        ]
        if not branches:
            return ""
        if "" in node:
            return f"(?:{'|'.join(branches)})?"
        return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"

    return pattern(root)


_EscapePatterns = tuple[tuple[bytes, re.Pattern[bytes]], ...]


@functools.lru_cache(maxsize=256)
def _escape_patterns(chars: str, final: bool) -> _EscapePatterns:
    """Escapes of the given characters only, a pattern per introducer: escapes of anything else
    cannot be part of a secret, and skipping them keeps escape-heavy bodies (JSON, HTML) fast, as
    does a pattern that starts with its literal introducer (searched for several times faster
    than an alternation of introducers). Cached by the set of characters, never by a secret.

    An escape that may end without a ";" ends where the next byte says so; unless the text is
    ``final``, that byte must be there (the next chunk may go on with digits)."""
    digits_end, hex_end, named_end = (
        ("(?![0-9])", "(?![0-9a-fA-F])", ";?")
        if final
        else ("(?=[^0-9])", "(?=[^0-9a-fA-F])", "(?:;|(?=[^;]))")
    )
    percent, quoted, backslash, decimal, hexadecimal, named = [], [], [], [], [], []
    for char in chars:
        encoded, units = char.encode(), _units(char)
        percent += ["%".join(f"{byte:02x}" for byte in encoded)]
        percent += ["%".join(f"u{unit:04x}" for unit in units)]
        quoted += ["=".join(f"{byte:02x}" for byte in encoded)]
        backslash += ["\\".join(f"u{unit:04x}" for unit in units)]
        backslash += ["\\".join(f"x{byte:02x}" for byte in encoded)]
        decimal += [str(ord(char))]
        hexadecimal += [f"{ord(char):x}"]
        name = _NAMED_BY_CHAR.get(char)
        if name in _LEGACY_NAMED:
            named += [f"(?:{name.decode()}|{name.decode().upper()}){named_end}"]
        elif name is not None:
            named += [f"{name.decode()};"]
    literal = "".join(re.escape(char) for char in chars if char in '"\\/')
    patterns = {
        b"%": f"%(?i:{_trie(percent)})",
        # Quoted-printable, its soft line breaks too (it is read before line breaks go).
        b"=": f"=(?:\\r?\\n|(?i:{_trie(quoted)}))",
        b"\\": rf"\\(?:(?i:{_trie(backslash)})" + (f"|[{literal}])" if literal else ")"),
        b"&": (
            f"&(?:#(?:0*{_trie(decimal)}(?:;|{digits_end})"
            f"|[xX]0*(?i:{_trie(hexadecimal)})(?:;|{hex_end}))"
            + "".join(f"|{entity}" for entity in named)
            + ")"
        ),
    }
    return tuple(
        (introducer, re.compile(patterns[introducer].encode()))
        for introducer in _INTRODUCERS
        if chars
    )


@functools.lru_cache(maxsize=256)
def _twice_percent_escapes(chars: str) -> re.Pattern[bytes]:
    """``%25XX``, each byte of one of the given characters percent-encoded twice (cached as
    :func:`_escape_patterns` is)."""
    words = ["%25".join(f"{byte:02x}" for byte in char.encode()) for char in chars]
    return re.compile(f"%25(?i:{_trie(words)})".encode())


@functools.lru_cache(maxsize=4096)
def _decoded_twice(escape: bytes) -> bytes:
    # Non-overlapping, left to right: "%2525" (a "%" twice) reads as "%25", then as "%".
    return _decoded(escape.replace(b"%25", b"%"))


def _decode_twice_match(match: re.Match[bytes]) -> bytes:
    return _decoded_twice(match[0])


_URL_SAFE = bytes.maketrans(b"+/", b"-_")
# What every percent-encoder leaves as it is (PHP's urlencode escapes "~", Java's "~" too).
_NEVER_ESCAPED = re.compile(rb"[a-z0-9._-]+")
_MIN_RUN = 4


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


def _utf16_forms(secret: str) -> dict[bytes, bytes]:
    """The value in UTF-16, each byte order, with what replaces it. A NUL byte at the value's
    outer edge is left out (of both), so an ASCII value has one form for both byte orders and the
    replacement keeps the rest of the body on its alignment."""
    forms: dict[bytes, bytes] = {}
    for codec, edge in (("utf-16-le", slice(None, -1)), ("utf-16-be", slice(1, None))):
        form, replacement = secret.encode(codec), REDACTED.encode(codec)
        outer = form[-1:] if codec == "utf-16-le" else form[:1]
        if outer == b"\0":
            form, replacement = form[edge], replacement[edge]
        forms.setdefault(form, replacement)
    return forms


class _Edits:
    """Where each byte of a decoded text came from: the decoding's edits of its source, each a
    (start, end, length of what replaced it)."""

    def __init__(self, edits: list[tuple[int, int, int]]) -> None:
        self.edits = edits
        self.starts: list[int] = []
        shift = 0
        for start, end, length in edits:
            self.starts.append(start + shift)
            shift += length - (end - start)

    def _source(self, at: int) -> tuple[int, int]:
        """The source bytes that the decoded byte at ``at`` came from."""
        index = bisect.bisect_right(self.starts, at) - 1
        if index < 0:
            return at, at + 1
        start, end, length = self.edits[index]
        inside = at - self.starts[index]
        if inside < length:
            return start, end
        source = end + inside - length
        return source, source + 1

    def span(self, start: int, end: int) -> tuple[int, int]:
        return self._source(start)[0], self._source(end - 1)[1]


def _occurrences(text: bytes, needle: bytes) -> Iterator[tuple[int, int]]:
    at = text.find(needle)
    while at >= 0:
        yield at, at + len(needle)
        at = text.find(needle, at + len(needle))


class _Decoding:
    """One decoding of a text: a pattern, and what each of its matches becomes."""

    def __init__(
        self,
        pattern: re.Pattern[bytes],
        replacement: bytes | Callable[[re.Match[bytes]], bytes],
    ) -> None:
        self.pattern = pattern
        self.replacement = replacement

    def apply(self, text: bytes) -> bytes:
        return self.pattern.sub(self.replacement, text)

    def edits(self, source: bytes) -> _Edits:
        replacement = self.replacement
        matches = self.pattern.finditer(source)
        if isinstance(replacement, bytes):
            length = len(replacement)
            return _Edits([(*match.span(), length) for match in matches])
        return _Edits([(*match.span(), len(replacement(match))) for match in matches])


class _Removal:
    """A byte removed wherever it is (bytes.replace: several times faster than a pattern)."""

    def __init__(self, byte: bytes) -> None:
        self.byte = byte

    def apply(self, text: bytes) -> bytes:
        return text.replace(self.byte, b"")

    def edits(self, source: bytes) -> _Edits:
        return _Edits([(start, end, 0) for start, end in _occurrences(source, self.byte)])


_Step = _Decoding | _Removal


# Line breaks, as wrapped base64, hex or text has them, in the order they are removed (JSON's "\/"
# read as "/" too), each where the byte it needs occurs in the text.
_UNWRAP: tuple[tuple[bytes, _Step], ...] = (
    (b"\r", _Removal(b"\r")),
    (b"\n", _Removal(b"\n")),
    (b"\\", _Decoding(re.compile(rb"\\[rn]"), b"")),
    (b"\\", _Decoding(re.compile(rb"\\/"), b"/")),
)


def _decode_match(match: re.Match[bytes]) -> bytes:
    return _decoded(match[0])


class _View:
    """A text decoded step by step from a source, each step's input kept so that a span found in
    the text can be traced back to the source (rarely needed: most chunks hold no secret)."""

    def __init__(self, source: bytes) -> None:
        self.text = source
        self._taken: list[tuple[_Step, bytes]] = []

    def apply(self, step: _Step) -> None:
        decoded = step.apply(self.text)
        # Every step shortens what it matches: an unchanged length is an unchanged text.
        if len(decoded) != len(self.text):
            self._taken.append((step, self.text))
            self.text = decoded

    def source_spans(self, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        if not spans:  # the common case: the edits are not worked out
            return spans
        for step, before in reversed(self._taken):
            edits = step.edits(before)
            spans = [edits.span(start, end) for start, end in spans]
        return spans


class _Pieces:
    """Finds the stretches of a text made of pieces of one value, where a piece is
    :data:`FRAGMENT_BYTES` or more. Probes of ``_PROBE`` bytes every ``_STEP`` bytes (of the text,
    or of the value when that is shorter) meet every such piece, since _PROBE + _STEP - 1 ==
    FRAGMENT_BYTES; a probe that is met is widened a byte at a time while each ``_PROBE`` bytes
    at its edge are in the value (a hashed lookup: the work is bounded by the text's length)."""

    _PROBE = FRAGMENT_BYTES // 2 + 1
    _STEP = FRAGMENT_BYTES - _PROBE + 1
    # Bytes that probing may search; past it (long values in many headers), the text's probes
    # are looked up among the value's instead.
    _SEARCH_BUDGET = 1 << 20

    def __init__(self, value: bytes) -> None:
        self.value = value
        self._probes: frozenset[bytes] | None = None

    @property
    def probes(self) -> frozenset[bytes]:
        """Every ``_PROBE`` bytes of the value, made when first needed."""
        if self._probes is None:
            value, probe = self.value, self._PROBE
            self._probes = frozenset(value[at : at + probe] for at in range(len(value) - probe + 1))
        return self._probes

    def _hits(self, text: bytes) -> Iterable[int]:
        value, probe, step = self.value, self._PROBE, self._STEP
        starts = range(0, len(text) - probe + 1, step)
        if min(len(value), len(text)) // step * max(len(value), len(text)) > self._SEARCH_BUDGET:
            probes = self.probes
            return (at for at in starts if text[at : at + probe] in probes)
        if len(value) > len(text):
            return (at for at in starts if text[at : at + probe] in value)
        met: set[int] = set()
        for offset in range(0, len(value) - probe + 1, step):
            piece = value[offset : offset + probe]
            if piece in text:
                met.update(at for at, _ in _occurrences(text, piece))
        return sorted(met)

    def spans(self, text: bytes) -> Iterator[tuple[int, int]]:
        if len(self.value) < FRAGMENT_BYTES:
            return
        probe = self._PROBE
        reached = 0
        for at in self._hits(text):
            if at + probe <= reached:
                continue
            probes = self.probes
            left, right = at, at + probe
            while left > reached and text[left - 1 : left - 1 + probe] in probes:
                left -= 1
            while right < len(text) and text[right + 1 - probe : right + 1] in probes:
                right += 1
            if right - left >= FRAGMENT_BYTES:
                yield left, right
                reached = right


def _replaced(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    out: list[bytes] = []
    position = 0
    for start, end in sorted(spans):
        if end <= position:
            continue
        out += [data[position : max(start, position)], _REDACTED_BYTES]
        position = end
    out.append(data[position:])
    return b"".join(out)


def _encodes(value: bytes, forms: set[bytes]) -> bool:
    """Whether ``value`` is the percent-encoding of another of ``forms``."""
    decoded = unquote_to_bytes(value)
    return decoded != value and decoded in forms


class Redactor:
    """Every form of the given secrets, ready to scrub bytes."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = {secret for secret in secrets if secret}
        plain = {form for secret in self.secrets for form in _plain_forms(secret)}
        # A form that is another's percent-encoding (a query key as sent) reads as that other
        # form once its escapes are read: the decoded views look for that one (also where it
        # is percent-encoded twice), and the form itself is looked for as it is, in hex and in
        # base64. Its "%" is no character of a value, whose escapes every view must read.
        read = {value for value in plain if b"%" not in value or not _encodes(value, plain)}
        # Looked for case-folded in the unwrapped text: the value, its hex, its base64. Longest
        # first, so a longer form is replaced whole before a shorter one inside it.
        self.values = sorted({value.lower() for value in read}, key=len, reverse=True)
        encoded = {value.hex().encode() for value in plain}
        for value in plain:
            if len(value) >= _MIN_BASE64_SOURCE:
                encoded.update(core.lower() for core in _base64_cores(value))
        self.unwrapped_forms = sorted(
            {*(value.lower() for value in plain), *encoded}, key=len, reverse=True
        )
        self._read = read
        self._encoded = encoded
        self._plain = plain
        # Made when first needed: few bodies are UTF-16, and only headers are searched for pieces.
        self._utf16: dict[bytes, bytes] | None = None
        self._pieces_of: list[_Pieces] | None = None

    # Made when first needed as well (each a few µs of a request's own redactor): escapes only
    # for a text that holds an introducer, the runs only where "%25" is, the longest form only
    # for a body that streams.

    @functools.cached_property
    def _chars(self) -> str:
        """Escapes of either case of each character, since the value is looked for
        case-folded."""
        text = b"".join(self._read).decode()
        return "".join(sorted({*text, *text.lower(), *text.upper()}))

    def _escapes(self, final: bool) -> _EscapePatterns:
        return _escape_patterns(self._chars, final)

    @functools.cached_property
    def twice_percent(self) -> re.Pattern[bytes]:
        return _twice_percent_escapes(self._chars)

    @functools.cached_property
    def unescaped_runs(self) -> list[bytes]:
        """What of each value no encoder escapes: percent-encoded twice, a value keeps it as it
        is, so a text without any of these is not read twice (bodies full of "%25" stay fast).
        A value without a run long enough has none, and every such text is read."""
        runs = [max(_NEVER_ESCAPED.findall(value), key=len, default=b"") for value in self.values]
        return runs if all(len(run) >= _MIN_RUN for run in runs) else []

    @functools.cached_property
    def longest_form(self) -> int:
        """The longest a form can be in the original bytes: each byte of a value escaped, or
        each character of its hex or base64, followed by a line break."""
        longest = max(map(len, self._plain), default=0) * (_LONGEST_ESCAPE + _LONGEST_BREAK)
        return max(longest, max(map(len, self._encoded), default=0) * (1 + _LONGEST_BREAK))

    @property
    def utf16(self) -> dict[bytes, bytes]:
        if self._utf16 is None:
            self._utf16 = {
                form: replacement
                for secret in self.secrets
                for form, replacement in _utf16_forms(secret).items()
            }
        return self._utf16

    def __call__(self, data: bytes, *, final: bool = True) -> bytes:
        """``data`` scrubbed. Not ``final``: more of the text follows (a body's chunk), so an
        escape that ends without a ";" at its very end is left for the next call to read."""
        return self._scrubbed(data, final, pieces=False)

    def text(self, text: str) -> str:
        return self(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")

    def headers(self, values: list[str]) -> list[str]:
        """Header values scrubbed as a body is, and of any piece of a value of
        :data:`FRAGMENT_BYTES` or more: headers are few and small (at most 16 KiB reach an app),
        and an upstream may cut a value over two of them. Read in one pass, apart: no form or
        piece of a value holds the separator, a control byte (values that hold one are read one
        by one)."""
        encoded = [value.encode("utf-8", "surrogateescape") for value in values]
        if len(encoded) < 2 or any(_HEADER_SEPARATOR in value for value in encoded):
            scrubbed = [self._scrubbed(value, True, pieces=True) for value in encoded]
        else:
            joined = self._scrubbed(_HEADER_SEPARATOR.join(encoded), True, pieces=True)
            scrubbed = joined.split(_HEADER_SEPARATOR)
        return [value.decode("utf-8", "surrogateescape") for value in scrubbed]

    def _scrubbed(self, data: bytes, final: bool, *, pieces: bool) -> bytes:
        if not self.values:
            return data
        if b"&" in data:
            data = _PADDING.sub(rb"\1", data)
        if b"\0" in data:
            for form, replacement in self.utf16.items():
                data = data.replace(form, replacement)
        spans = self._spans(data, final, pieces=pieces)
        return _replaced(data, spans) if spans else data

    def _pieces(self) -> list[_Pieces]:
        if self._pieces_of is None:
            self._pieces_of = [_Pieces(value) for value in self.values]
        return self._pieces_of

    def _found(
        self, folded: bytes, forms: list[bytes], *, pieces: bool
    ) -> Iterator[tuple[int, int]]:
        for form in forms:
            if form in folded:
                yield from _occurrences(folded, form)
        if pieces:
            for value in self._pieces():
                yield from value.spans(folded)

    def _spans(self, data: bytes, final: bool, *, pieces: bool) -> list[tuple[int, int]]:
        """Where a form is (with ``pieces``, also a piece of a value), as spans of ``data``: any
        form in the unwrapped text and in the quoted-printable reading of ``data``, the value in
        the escape-decoded text and, where ``%25`` occurs, in the text percent-decoded twice."""
        unwrapped = _View(data)
        for trigger, step in _UNWRAP:
            if trigger in unwrapped.text:
                unwrapped.apply(step)
        folded = unwrapped.text.lower()
        found = list(self._found(folded, self.unwrapped_forms, pieces=pieces))
        escaped = _View(unwrapped.text)
        quoted: _View | None = None
        text = unwrapped.text
        has_escapes = b"%" in text or b"\\" in text or b"&" in text or b"=" in text
        escapes = self._escapes(final) if has_escapes else ()
        for introducer, pattern in escapes:
            if introducer not in unwrapped.text:
                continue
            if introducer != b"=":
                escaped.apply(_Decoding(pattern, _decode_match))
            else:
                # A reading of its own: "=" ends many a plain line and a base64 value, and
                # begins many a query value ("?k=45..."), which are not quoted-printable.
                quoted = _View(data)
                quoted.apply(_Decoding(pattern, _decode_match))
        if escaped.text is not unwrapped.text:
            found += escaped.source_spans(
                list(self._found(escaped.text.lower(), self.values, pieces=pieces))
            )
        # Cheapest first: a "%" (memchr), a run of a value (long), then "%25" (short, slower).
        if (
            b"%" in unwrapped.text
            and (not self.unescaped_runs or any(run in folded for run in self.unescaped_runs))
            and b"%25" in unwrapped.text
        ):
            twice = _View(unwrapped.text)
            twice.apply(_Decoding(self.twice_percent, _decode_twice_match))
            if twice.text is not unwrapped.text:
                # Looked for before the other escapes are read too: a value may hold "%41".
                found += twice.source_spans(
                    list(self._found(twice.text.lower(), self.values, pieces=pieces))
                )
                decoded = twice.text
                for introducer, pattern in escapes:
                    if introducer != b"=" and introducer in twice.text:
                        twice.apply(_Decoding(pattern, _decode_match))
                if twice.text is not decoded:
                    found += twice.source_spans(
                        list(self._found(twice.text.lower(), self.values, pieces=pieces))
                    )
        spans = unwrapped.source_spans(found) if found else []
        if quoted is not None and quoted.text is not data:
            for trigger, step in _UNWRAP:
                if trigger in quoted.text:
                    quoted.apply(step)
            spans += quoted.source_spans(
                list(self._found(quoted.text.lower(), self.unwrapped_forms, pieces=pieces))
            )
        return spans


def scrub(text: str, secrets: Iterable[str]) -> str:
    return Redactor(secrets).text(text)


class BodyScrubber:
    """Scrubs a body chunk by chunk; ``feed`` each chunk, then ``flush`` the rest."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        # Also a whole form whose end only the next byte confirms.
        self.keep = self.redact.longest_form
        self.carry = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self.redact(self.carry + chunk, final=False)
        # The tail may hold the start of a secret that the next chunk completes.
        cut = max(len(data) - self.keep, 0)
        self.carry = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        rest, self.carry = self.carry, b""
        return self.redact(rest) if rest else rest


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
