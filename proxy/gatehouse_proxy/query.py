"""The app's query string as it goes upstream: parsed into pairs, checked, written out again.

An upstream reads the query with its own parser, so the proxy sends only what every parser reads
the same way. Each pair is re-encoded from its decoded bytes (no stray ``%``, no raw non-ASCII). A
``#`` is refused: it would push what follows, the injected key included, into a fragment that is
never sent. On a connection that injects an API key into the query, ``;`` is refused too (legacy
parsers split on it and read the app's value first), and every pair is removed whose name any
parser could read as the key's name, compared without case. The readings follow PHP's
``php_register_variable_ex`` and Rack's ``normalize_params``: a name ends at a NUL; surrounding
whitespace goes; space, ``.`` and ``-`` read as ``_``, and so do bytes 0x80 to 0x9F (older PHP);
``name[...]`` is an array called ``name`` (PHP, Rack, qs); a ``[`` that nothing closes reads as
``_`` with the rest kept (PHP); leading brackets are skipped and a name ends at the next one
(Rack 2). Names are read after ``+`` and percent-decoding, as parsers read them.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote_to_bytes

from gatehouse_proxy.errors import ProxyError

# RFC 3986 query characters that need no encoding, minus the separators ``&``, ``=`` and ``;``;
# ``+`` stays as the app wrote it (a space to form parsers, a plus to others, as it was).
_SAFE = "-._~!$'()*,/:@+"
_SEPARATOR_LIKE = re.compile(rb"[. \-\x80-\x9f]")
_BRACKET = re.compile(rb"[\[\]]")


def _names_as_parsers_read_it(raw: bytes) -> set[bytes]:
    """Every name a parser could read ``raw`` (a name as sent, still encoded) as, folded."""
    name = unquote_to_bytes(raw.replace(b"+", b" ")).partition(b"\0")[0].strip()
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


def _encoded(raw: bytes, safe: str) -> str:
    return quote(unquote_to_bytes(raw), safe=safe)


def upstream_query(raw: bytes, injected: tuple[str, str] | None) -> str:
    """``?`` and the pairs to send upstream (or nothing), with the injected key appended."""
    if b"#" in raw:
        raise ProxyError("invalid_query", "the query string must not contain '#'")
    if injected is not None and b";" in raw:
        raise ProxyError(
            "invalid_query",
            "the query string must not contain a raw ';' on this connection (encode it as %3B)",
        )
    # The key's name as it is sent (encoded below), read the same way.
    shadowed = _names_as_parsers_read_it(quote(injected[0], safe="").encode()) if injected else None
    # Without an injected key there is nothing to shadow, and ';' keeps its meaning to the API.
    safe = _SAFE if injected else _SAFE + ";"
    pairs: list[str] = []
    for pair in raw.split(b"&"):
        if not pair:
            continue
        name, equals, value = pair.partition(b"=")
        if shadowed is not None and not shadowed.isdisjoint(_names_as_parsers_read_it(name)):
            continue
        pairs.append(_encoded(name, safe) + ("=" + _encoded(value, safe) if equals else ""))
    if injected is not None:
        key_name, secret = injected
        pairs.append(f"{quote(key_name, safe='')}={quote(secret, safe='')}")
    return "?" + "&".join(pairs) if pairs else ""
