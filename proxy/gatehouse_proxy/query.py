"""The app's query string as it goes upstream: parsed into pairs, checked, written out again.

An upstream reads the query with its own parser, so the proxy sends only what every parser reads
the same way. Each pair is re-encoded from its decoded bytes (no stray ``%``, no raw non-ASCII). A
``#`` is refused: it would push what follows, the injected key included, into a fragment that is
never sent. On a connection that injects an API key into the query, ``;`` is refused too (legacy
parsers split on it and read the app's value first), and every pair whose name a parser could take
for the key's name is removed: any case, ``[]`` or ``[0]`` after it (PHP, Rails), ``.``, space or
``-`` for ``_`` (PHP), or cut short by an encoded NUL (C parsers).
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote_to_bytes

from gatehouse_proxy.errors import ProxyError

# RFC 3986 query characters that need no encoding, minus the separators ``&``, ``=`` and ``;``;
# ``+`` stays as the app wrote it (a space to form parsers, a plus to others, as it was).
_SAFE = "-._~!$'()*,/:@+"
_ARRAY_SUFFIX = re.compile(rb"\[[^\]]*\]$")
_SEPARATOR_LIKE = re.compile(rb"[. _-]")


def _name_as_parsers_read_it(raw: bytes) -> bytes:
    name = unquote_to_bytes(raw.replace(b"+", b" ")).partition(b"\0")[0].strip().lower()
    return _SEPARATOR_LIKE.sub(b"_", _ARRAY_SUFFIX.sub(b"", name))


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
    shadowed = _name_as_parsers_read_it(injected[0].encode()) if injected else None
    # Without an injected key there is nothing to shadow, and ';' keeps its meaning to the API.
    safe = _SAFE if injected else _SAFE + ";"
    pairs: list[str] = []
    for pair in raw.split(b"&"):
        if not pair:
            continue
        name, equals, value = pair.partition(b"=")
        if shadowed is not None and _name_as_parsers_read_it(name) == shadowed:
            continue
        pairs.append(_encoded(name, safe) + ("=" + _encoded(value, safe) if equals else ""))
    if injected is not None:
        key_name, secret = injected
        pairs.append(f"{quote(key_name, safe='')}={quote(secret, safe='')}")
    return "?" + "&".join(pairs) if pairs else ""
