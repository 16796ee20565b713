"""Deciding whether a request may go upstream: its method, and its path against the prefixes.

The path is taken raw, as the app sent it, and normalised once, here. Anything whose meaning could
differ between this proxy and the upstream server is refused rather than guessed at: dot segments
(also encoded, double-encoded or with ``;`` parameters), encoded slashes and backslashes, empty
segments, control characters, invalid UTF-8. What passes is re-encoded canonically, so the upstream
sees exactly the path that was checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote_to_bytes

from gatehouse_proxy.errors import ProxyError

# RFC 3986 pchar minus "%" (re-encoded below) and ";" (kept: some APIs use matrix parameters).
_SAFE = "!$&'()*+,;=:@-._~"
_PERCENT = re.compile(rb"%[0-9A-Fa-f]{2}")
_FORBIDDEN_RAW = re.compile(rb"[\x00-\x20\x7f\\#]")
_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class UpstreamPath:
    segments: tuple[str, ...]
    trailing_slash: bool

    @property
    def encoded(self) -> str:
        path = "/" + "/".join(quote(segment, safe=_SAFE) for segment in self.segments)
        if self.trailing_slash and self.segments:
            path += "/"
        return path


def normalise(raw: bytes) -> UpstreamPath:
    """The canonical form of a raw, percent-encoded path relative to the connection's origin."""
    if _FORBIDDEN_RAW.search(raw):
        raise ProxyError(
            "invalid_path", "the path contains whitespace, control characters, # or \\"
        )
    if b"%" in _PERCENT.sub(b"", raw):
        raise ProxyError("invalid_path", "the path contains a malformed percent-escape")
    parts = raw.split(b"/")
    if parts and parts[0] == b"":
        parts = parts[1:]
    trailing = bool(parts) and parts[-1] == b""
    if trailing:
        parts = parts[:-1]

    segments: list[str] = []
    for part in parts:
        if part == b"":
            raise ProxyError("invalid_path", "the path contains an empty segment (//)")
        decoded = unquote_to_bytes(part)
        if b"/" in decoded or b"\\" in decoded:
            raise ProxyError("invalid_path", "the path contains an encoded slash or backslash")
        if _PERCENT.search(decoded):
            raise ProxyError("invalid_path", "the path is percent-encoded twice")
        if _CONTROL.search(decoded):
            raise ProxyError("invalid_path", "the path contains an encoded control character")
        try:
            text = decoded.decode("utf-8")
        except UnicodeDecodeError:
            raise ProxyError("invalid_path", "the path is not valid UTF-8") from None
        if text.split(";", 1)[0] in (".", ".."):
            raise ProxyError("path_traversal", "the path contains a . or .. segment")
        segments.append(text)
    return UpstreamPath(tuple(segments), trailing)


def allowed_by_prefixes(path: UpstreamPath, prefixes: tuple[str, ...]) -> bool:
    """Whole-segment prefix match: /v1/users allows /v1/users and /v1/users/7, not /v1/users-x."""
    if not prefixes:
        return True
    for prefix in prefixes:
        wanted = [segment for segment in prefix.split("/") if segment]
        if list(path.segments[: len(wanted)]) == wanted:
            return True
    return False


def check_method(method: str, allowed: frozenset[str]) -> None:
    if method not in allowed:
        raise ProxyError(
            "method_not_allowed",
            f"{method} is not allowed on this connection",
            headers={"Allow": ", ".join(sorted(allowed))},
        )


def check_path(path: UpstreamPath, prefixes: tuple[str, ...]) -> None:
    if not allowed_by_prefixes(path, prefixes):
        raise ProxyError("path_not_allowed", "the path is outside the connection's allowed paths")
