"""Deciding whether a request may go upstream: its method, and its path against the prefixes.

The path is taken raw, as the app sent it, and normalised once, here. Anything whose meaning could
differ between this proxy and the upstream server is refused rather than guessed at: dot segments
(also encoded, double-encoded or with ``;`` parameters), encoded slashes and backslashes, empty
segments, control characters, invalid UTF-8, and an escape left after one decoding, ``%XX`` or
IIS's ``%uXXXX`` (``%25u002e`` is a dot to IIS decoding twice). So is a segment that some server
reads as one of those: servers trim whitespace around a segment and drop invisible characters;
frameworks fold Unicode look-alikes (NFKC turns fullwidth, small and leader dots into dots);
Windows converts to its code pages by "best fit" (the WorstFit research), turning fraction and
division slashes, set minus, yen and won signs into slashes and backslashes. What passes is
re-encoded canonically, so the upstream sees exactly the path that was checked.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import quote, unquote_to_bytes

from gatehouse_proxy.errors import ProxyError

# RFC 3986 pchar minus "%" (re-encoded below) and ";" (kept: some APIs use matrix parameters).
_SAFE = "!$&'()*+,;=:@-._~"
_PERCENT = re.compile(rb"%[0-9A-Fa-f]{2}")
# What a second decoding reads as an escape: IIS also decodes %uXXXX (a UTF-16 code unit).
_ESCAPE = re.compile(rb"%(?:[0-9A-Fa-f]{2}|[uU][0-9A-Fa-f]{4})")
_FORBIDDEN_RAW = re.compile(rb"[\x00-\x20\x7f\\#]")
_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")
# Where a server stops reading a segment's name: Tomcat's ";" parameters, and "?" or "#" that a
# server decoding the path, or folding look-alikes into them, reads as the end of the path.
_NAME_END = re.compile("[;?#]")
_ESCAPE_TEXT = re.compile("%(?:[0-9A-Fa-f]{2}|[uU][0-9A-Fa-f]{4})")
# Every Windows best-fit conversion (WideCharToMultiByte without WC_NO_BEST_FIT_CHARS) onto a
# character that structures a path, from Microsoft's bestfit*.txt tables, with the code pages.
_BEST_FIT = str.maketrans(
    {
        "\uff0e": ".",  # fullwidth full stop: 874, 1250 to 1258
        "\uff0f": "/",  # fullwidth solidus: 874, 1250 to 1258
        "\u2044": "/",  # fraction slash: 1250, 1252, 1254
        "\u2215": "/",  # division slash: 1250, 1252, 1254
        "\u00b4": "/",  # acute accent: 1253
        "\uff3c": "\\",  # fullwidth reverse solidus: 874, 1250 to 1258
        "\u2216": "\\",  # set minus: 1250, 1252, 1254
        "\u00a5": "\\",  # yen sign: 932, where 0x5C is the path separator
        "\u20a9": "\\",  # won sign: 949, 1361
        "\uff1f": "?",  # fullwidth question mark: 874, 1250 to 1258
        "\u00bf": "?",  # inverted question mark: 932, 950, 1250
        "\uff03": "#",  # fullwidth number sign: 874, 1250 to 1258
        "\uff1b": ";",  # fullwidth semicolon: 874, 1250 to 1258
        "\u037e": ";",  # Greek question mark: 1250, 1252, 1253
        "\uff05": "%",  # fullwidth percent sign: 874, 1250 to 1258
        "\u066a": "%",  # Arabic percent sign: 1250, 1252, 1254
    }
)
# What servers trim around a name or drop from it: whitespace, controls, format characters (zero
# width, byte order mark, bidi), combining marks, and unassigned code points (a newer Unicode may
# make them default-ignorable); plus the Hangul fillers, letters that are default-ignorable.
_INVISIBLE = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cn", "Mn", "Me"})
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0")


@dataclass(frozen=True)
class UpstreamPath:
    segments: tuple[str, ...]
    trailing_slash: bool

    @functools.cached_property
    def encoded(self) -> str:
        path = "/" + "/".join(quote(segment, safe=_SAFE) for segment in self.segments)
        if self.trailing_slash and self.segments:
            path += "/"
        return path


# Apps fetch the same paths again and again: the canonical form of a short path is kept (bounded
# in count and length; a refused path is never kept, so it is checked anew each time).
_CACHED_PATH_BYTES = 256


def normalise(raw: bytes) -> UpstreamPath:
    """The canonical form of a raw, percent-encoded path relative to the connection's origin."""
    return _known_path(raw) if len(raw) <= _CACHED_PATH_BYTES else _normalise(raw)


@functools.lru_cache(maxsize=2048)
def _known_path(raw: bytes) -> UpstreamPath:
    return _normalise(raw)


def _normalise(raw: bytes) -> UpstreamPath:
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
        if _ESCAPE.search(decoded):
            raise ProxyError(
                "invalid_path", "the path is percent-encoded twice (a %XX or %uXXXX escape)"
            )
        if _CONTROL.search(decoded):
            raise ProxyError("invalid_path", "the path contains an encoded control character")
        try:
            text = decoded.decode("utf-8")
        except UnicodeDecodeError:
            raise ProxyError("invalid_path", "the path is not valid UTF-8") from None
        _check_segment(text)
        segments.append(text)
    return UpstreamPath(tuple(segments), trailing)


def _check_segment(text: str) -> None:
    """Refuses a decoded segment that any server could read as ``.``, ``..``, empty, or more
    than one segment."""
    if text.isascii():
        # Controls are refused already, so a space is all a server could trim; and a name that
        # starts with anything else than a space or a dot is never all dots.
        if text[0] in " .":
            name = _NAME_END.split(text, maxsplit=1)[0]
            if not name.strip(" ."):
                _refuse_dots(name, "dots and spaces only")
        return
    # A server folds by NFKC or by best fit, not both: each reading is checked on its own.
    for folded in (unicodedata.normalize("NFKC", text), text.translate(_BEST_FIT)):
        if "/" in folded or "\\" in folded:
            raise ProxyError(
                "invalid_path",
                "the path contains a character that some servers read as / or \\ "
                "(a fullwidth, small or division slash, set minus, yen or won sign...)",
            )
        if _ESCAPE_TEXT.search(folded):
            raise ProxyError(
                "invalid_path",
                "the path contains a look-alike of a percent-escape (%XX or %uXXXX)",
            )
        name = _NAME_END.split(folded, maxsplit=1)[0]
        if name and all(
            char == "." or char in _FILLERS or unicodedata.category(char) in _INVISIBLE
            for char in name
        ):
            _refuse_dots(
                _NAME_END.split(text, maxsplit=1)[0],
                "look-alike dots, Unicode whitespace or invisible characters",
            )


def _refuse_dots(name: str, detail: str) -> NoReturn:
    if name in (".", ".."):
        raise ProxyError("path_traversal", "the path contains a . or .. segment")
    raise ProxyError(
        "invalid_path",
        f"the path contains a segment that some servers read as ., .. or empty ({detail})",
    )


def allowed_by_prefixes(path: UpstreamPath, prefixes: tuple[str, ...]) -> bool:
    """Whole-segment prefix match: /v1/users allows /v1/users and /v1/users/7, not /v1/users-x."""
    if not prefixes:
        return True
    for prefix in prefixes:
        wanted = [segment for segment in prefix.split("/") if segment]
        if list(path.segments[: len(wanted)]) == wanted:
            return True
    return False


# An endpoint is at least this many segments of the path (/v1/users of /v1/users/7).
ENDPOINT_SEGMENTS = 2


def endpoint_of(path: UpstreamPath, prefixes: tuple[str, ...]) -> str:
    """The endpoint a request calls, as vendor pauses and 401s tell endpoints apart: the path
    cut to the segments of the longest allowed prefix it falls under, and to at least its first
    two (/v1/users/7 is /v1/users; under an allowed /v1/search/repos, that). Matrix parameters
    (;sid=...) are left out: they name no other endpoint, and may carry what is not to be
    shown."""
    length = ENDPOINT_SEGMENTS
    for prefix in prefixes:
        wanted = [segment for segment in prefix.split("/") if segment]
        if len(wanted) > length and list(path.segments[: len(wanted)]) == wanted:
            length = len(wanted)
    names = (segment.split(";", 1)[0] for segment in path.segments[:length])
    return "/" + "/".join(quote(name, safe=_SAFE) for name in names)


def check_method(method: str, allowed: frozenset[str]) -> None:
    if not allowed:
        # An image-only connection: browsers load its images straight from the origin.
        raise ProxyError(
            "images_only",
            "this connection serves public images only, loaded straight from its origin; "
            "it allows no requests through the proxy",
            headers={"Allow": ""},
        )
    if method not in allowed:
        raise ProxyError(
            "method_not_allowed",
            f"{method} is not allowed on this connection",
            headers={"Allow": ", ".join(sorted(allowed))},
        )


def check_path(path: UpstreamPath, prefixes: tuple[str, ...]) -> None:
    if not allowed_by_prefixes(path, prefixes):
        raise ProxyError("path_not_allowed", "the path is outside the connection's allowed paths")
