"""The app's query string as it goes upstream: checked, and sent as the app wrote it.

An upstream reads the query with its own parser, so the proxy never re-encodes what the app
encoded correctly: re-encoding from decoded bytes would turn ``%2B`` into a raw ``+``, which form
parsers read as a space (``a%2Bb`` would arrive as ``a b``: phone numbers, base64, ``+01:00``
offsets; and a name ``api%2Bkey`` as ``api key``, which PHP reads as ``api_key``). The rule:

- every byte goes upstream as the app wrote it: an escape stays an escape, in the case it was
  written (``%2B``, ``%7e``, IIS's ``%uXXXX``), and a character that may go raw stays raw (RFC
  3986's unreserved and sub-delimiter characters, ``:``, ``@``, ``/``, ``?``, ``+``, and ``=``);
- what may not go raw is percent-encoded: controls, space, non-ASCII bytes, ``"<>[\\]^`{|}``, and
  a ``%`` that starts no escape (``%zz``, a final ``%``), which becomes ``%25``;
- empty pairs (``&&``) are dropped.

A ``#`` is refused: it would push what follows, the injected key included, into a fragment that
is never sent. On a connection that injects an API key into the query, ``;`` is refused too
(legacy parsers split on it and read the app's value first), every pair is removed whose name any
parser could read as the key's name (:class:`Names`), and the key is appended.

Names are read as parsers read them, after ``+`` and percent-decoding (and with ``+`` left alone,
as JavaScript's ``decodeURIComponent`` and RFC 3986 parsers do; and with IIS's and classic ASP's
``%uXXXX`` decoded), compared without case. The readings follow PHP's
``php_register_variable_ex`` and Rack's ``normalize_params``: a name ends at a NUL; surrounding
whitespace goes; space, ``.`` and ``-`` read as ``_``, and so do bytes 0x80 to 0x9F (older PHP);
``name[...]`` is an array called ``name`` (PHP, Rack, qs); a ``[`` that nothing closes reads as
``_`` with the rest kept (PHP); leading brackets are skipped and a name ends at the next one
(Rack 2). A name with characters beyond ASCII is also read folded: by NFKC (fullwidth letters,
the fullwidth low line, ligatures), by the case-insensitive comparisons of Go
(``strings.EqualFold``) and Java (``equalsIgnoreCase``), which take the Kelvin sign for ``k``,
the long s for ``s`` and the dotted and dotless I for ``i``, and by full case folding (Ruby's
``casecmp?``, Python's ``casefold``: ``ß`` is ``ss``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from urllib.parse import quote, unquote_to_bytes

from gatehouse_contract import sent_forms
from gatehouse_proxy.errors import ProxyError

_SEPARATOR_LIKE = re.compile(rb"[. \-\x80-\x9f]")
_BRACKET = re.compile(rb"[\[\]]")
# What may not go upstream as the app wrote it: a "%" that starts no escape, and every byte that
# RFC 3986 does not allow raw in a query ("&" separates pairs; "#" and, where a key is injected,
# ";" are refused before this is applied).
_NOT_AS_WRITTEN = re.compile(
    rb"%(?![0-9A-Fa-f]{2}|[uU][0-9A-Fa-f]{4})|[^A-Za-z0-9\-._~!$'()*,/:@+=?;%&]"
)
_IIS_ESCAPE = re.compile(rb"%[uU]([0-9A-Fa-f]{4})")
_ESCAPED_NAME = re.compile(rb"(?:^|&)[^&=%]*%")
_LETTERS_AND_DIGITS = re.compile(rb"[a-z0-9]+")
# Every character beyond ASCII that a case-insensitive comparison reads as an ASCII letter. From
# a throwaway program over every code point (0x80 to 0x10FFFF): Go 1.26's unicode.SimpleFold
# orbits (strings.EqualFold) with unicode.ToLower and ToUpper, and Java 17's
# Character.toUpperCase, toLowerCase and toLowerCase(toUpperCase(c)) (String.equalsIgnoreCase)
# both give exactly these four.
_FOLDS_ONTO_ASCII = str.maketrans(
    {
        "\u0130": "i",  # LATIN CAPITAL LETTER I WITH DOT ABOVE: lower case i (Go, Java)
        "\u0131": "i",  # LATIN SMALL LETTER DOTLESS I: upper case I (Go, Java)
        "\u017f": "s",  # LATIN SMALL LETTER LONG S: upper case S, folds with s (Go, Java)
        "\u212a": "k",  # KELVIN SIGN: lower case k, folds with k (Go, Java)
    }
)


def _as_written(raw: bytes) -> str:
    return _NOT_AS_WRITTEN.sub(lambda found: b"%%%02X" % found[0][0], raw).decode("ascii")


def _iis_decoded(raw: bytes) -> bytes:
    return _IIS_ESCAPE.sub(
        lambda found: chr(int(found[1], 16)).encode("utf-8", "surrogatepass"), raw
    )


def names_read_as(raw: bytes) -> set[bytes]:
    """Every name a parser could read ``raw`` (a name as sent in a query or a form body, still
    encoded) as, folded."""
    decoded = {unquote_to_bytes(raw.replace(b"+", b" "))}
    if b"+" in raw:
        decoded.add(unquote_to_bytes(raw))
    if _IIS_ESCAPE.search(raw):
        decoded.add(unquote_to_bytes(_iis_decoded(raw).replace(b"+", b" ")))
    return set().union(*(decoded_names_read_as(name) for name in decoded))


def decoded_names_read_as(name: bytes) -> set[bytes]:
    """Every name a parser could read ``name`` (decoded, as in a JSON key or a multipart part's
    name) as, folded."""
    name = name.partition(b"\0")[0].strip()
    names = {name} if name.isascii() else {name, *_unicode_readings(name)}
    return set().union(*(_array_readings(each) for each in names))


def _unicode_readings(name: bytes) -> set[bytes]:
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return set()
    readings = set()
    for form in (text, unicodedata.normalize("NFKC", text)):
        readings.add(form.translate(_FOLDS_ONTO_ASCII).encode().strip())
        readings.add(form.casefold().encode().strip())
    return readings


def _array_readings(name: bytes) -> set[bytes]:
    readings = {name}
    bracket = name.find(b"[")
    if bracket != -1:
        # An array called what comes before (PHP, Rack, qs), whatever follows.
        readings.add(name[:bracket])
        if b"]" not in name[bracket + 1 :]:
            # PHP turns a "[" that nothing closes into "_" and keeps the rest as it is.
            readings.add(name[:bracket] + b"_" + name[bracket + 1 :])
    if bracket != -1 or b"]" in name:
        # Rack 2 skips leading brackets and ends the name at the next one.
        readings.add(_BRACKET.split(name.lstrip(b"[]"), maxsplit=1)[0])
    return {_SEPARATOR_LIKE.sub(b"_", reading.lower()) for reading in readings}


class Names:
    """Names to look for, as every parser reads them; ``spelled`` as they are sent (encoded)."""

    def __init__(self, spelled: Iterable[bytes]) -> None:
        self.readings = frozenset().union(*(names_read_as(name) for name in spelled))
        # A name can read as one of these only if it holds each run of letters and digits of
        # one of them, or has an escape or a character beyond ASCII that could make them.
        self._runs = tuple(tuple(_LETTERS_AND_DIGITS.findall(reading)) for reading in self.readings)
        runs = {run for runs in self._runs for run in runs}
        hints = b"|".join([b"%", rb"[\x80-\xff]", *(b"(?i:%s)" % run for run in sorted(runs))])
        if not all(self._runs):
            hints = b""  # a reading without letters or digits: every name may be one
        # The pairs of a query or form body whose name has one of those hints, found in C.
        self._candidates = re.compile(rb"(?:^|(?<=&))([^&=]*?(?:%s)[^&=]*)(?:=([^&]*))?" % hints)

    def may_be_in(self, raw: bytes) -> bool:
        """Whether ``raw`` holds, in any case, each run of letters and digits of one of the
        readings: text without escapes or characters beyond ASCII names one of them only then."""
        return self.may_be_in_lowered(raw.lower())

    def may_be_in_lowered(self, lowered: bytes) -> bool:
        """The same for text already in lower case."""
        for runs in self._runs:
            for run in runs:
                if run not in lowered:
                    break
            else:
                return True
        return False

    def may_name_a_pair_in(self, raw: bytes) -> bool:
        """A first look at a query: False when no name in it can read as one of the names."""
        return not raw.isascii() or escaped_name_in(raw) or self.may_be_in(raw)

    def reads_as(self, raw: bytes) -> bool:
        """Whether some parser reads ``raw`` (a name as sent, encoded) as one of the names."""
        if raw.isascii() and b"%" not in raw and not self.may_be_in(raw):
            return False
        return not self.readings.isdisjoint(names_read_as(raw))

    def reads_decoded_as(self, name: bytes) -> bool:
        """The same for a name already decoded (a JSON key, a multipart part's name)."""
        if name.isascii() and not self.may_be_in(name):
            return False
        return not self.readings.isdisjoint(decoded_names_read_as(name))

    def pairs_in(self, raw: bytes) -> Iterator[bytes | None]:
        """The value (as sent; None without ``=``) of every pair in ``raw``, a query or form
        body, whose name reads as one of the names; pairs without a hint cost no Python."""
        for pair in self._candidates.finditer(raw):
            if self.reads_as(pair[1]):
                yield pair[2]


def escaped_name_in(raw: bytes) -> bool:
    """Whether a name in ``raw`` (a query or form body, or a piece of one) has an escape."""
    return _ESCAPED_NAME.search(raw) is not None


@functools.lru_cache(maxsize=1024)
def key_names(name: str) -> Names:
    """The readings of an injected key's name, as it is sent (encoded)."""
    return Names([quote(name, safe="").encode()])


def upstream_query(raw: bytes, injected: tuple[str, str] | None) -> str:
    """``?`` and the pairs to send upstream (or nothing), with the injected key appended."""
    if b"#" in raw:
        raise ProxyError("invalid_query", "the query string must not contain '#'")
    if injected is None:
        kept = [pair for pair in raw.split(b"&") if pair]
        return "?" + _as_written(b"&".join(kept)) if kept else ""
    if b";" in raw:
        raise ProxyError(
            "invalid_query",
            "the query string must not contain a raw ';' on this connection (encode it as %3B)",
        )
    shadowed = key_names(injected[0])
    kept = [pair for pair in raw.split(b"&") if pair and not shadowed.reads_as(pair.split(b"=")[0])]
    key_name, secret = injected
    appended = f"{quote(key_name, safe='')}={sent_forms.query_value(secret).value}"
    return "?" + "&".join([_as_written(pair) for pair in kept] + [appended])
