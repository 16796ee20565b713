"""Reading ``Cache-Control`` (RFC 9111 5.2) and ``Vary`` (RFC 9110 12.5.5) by their grammar,
bounded: what a vendor or an app writes there decides only whether and how long an answer is kept.

A field's directives are a comma-separated list of ``token [ "=" ( token / quoted-string ) ]``,
names without case. A field too long, or with too many directives, is read as ``no-store``: an
answer nobody can read the rules of is not kept. A number is ``1*DIGIT`` and saturates at
``MAX_SECONDS`` (RFC 9111 1.2.2: a cache treats an overflowing delta-seconds as the largest it
can hold); anything else in its place makes the directive say nothing. Repeated directives with
different values are read as the RFC asks of a cache (4.2.1: the most restrictive, here the
smallest age).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# The longest Cache-Control (all of an answer's lines) and Vary read, and their most items: far
# past what vendors send; a field beyond it is read as no-store.
MAX_FIELD_CHARS = 2048
MAX_ITEMS = 32
MAX_SECONDS = 2**31 - 1

_TCHARS = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_DIRECTIVE = re.compile(
    rf'\s*(?P<name>{_TCHARS})\s*(?:=\s*(?:(?P<token>{_TCHARS})|"(?P<quoted>(?:[^"\\]|\\.)*)"))?\s*'
)
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class CacheControl:
    """What one message's Cache-Control says, as far as a shared cache in front of a vendor
    acts on it (its stale windows are the connection's, set by its admin: a vendor's own
    stale-while-revalidate and stale-if-error are not read)."""

    no_store: bool = False
    no_cache: bool = False
    private: bool = False
    # s-maxage where given (a shared cache's own), else max-age; None: neither.
    max_age: int | None = None
    must_revalidate: bool = False


UNREADABLE = CacheControl(no_store=True)


def cache_control(values: Iterable[str]) -> CacheControl:
    """The directives of every line of a message's Cache-Control field."""
    lines = list(values)
    if not lines:
        return CacheControl()
    text = ",".join(lines)
    if len(text) > MAX_FIELD_CHARS:
        return UNREADABLE
    items = [item for item in _split(text) if item.strip()]
    if len(items) > MAX_ITEMS:
        return UNREADABLE
    found: dict[str, list[str | None]] = {}
    for item in items:
        matched = _DIRECTIVE.fullmatch(item)
        if matched is None:
            continue  # RFC 9111 5.2: a directive not understood is ignored
        value = matched.group("token")
        if value is None and matched.group("quoted") is not None:
            value = re.sub(r"\\(.)", r"\1", matched.group("quoted"))
        found.setdefault(matched.group("name").lower(), []).append(value)
    shared_age = _seconds(found.get("s-maxage"))
    return CacheControl(
        no_store="no-store" in found,
        # A qualified no-cache (no-cache="Set-Cookie") is read whole: the answer is revalidated.
        no_cache="no-cache" in found,
        private="private" in found,
        max_age=shared_age if shared_age is not None else _seconds(found.get("max-age")),
        must_revalidate="must-revalidate" in found or "proxy-revalidate" in found,
    )


def vary(values: Iterable[str]) -> tuple[str, ...] | None:
    """The request header names an answer varies on, lower case and in order; ``("*",)`` for
    ``Vary: *`` (the answer is never reused); None when the field is past the bounds."""
    text = ",".join(values)
    if len(text) > MAX_FIELD_CHARS:
        return None
    names = sorted({name.strip().lower() for name in text.split(",") if name.strip()})
    if len(names) > MAX_ITEMS or not all(re.fullmatch(_TCHARS, name) for name in names):
        return None
    return ("*",) if "*" in names else tuple(names)


def _split(text: str) -> list[str]:
    """The field's items, split at commas outside quoted strings."""
    items: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            items.append("".join(current))
            current = []
            continue
        current.append(char)
    items.append("".join(current))
    return items


def _seconds(values: list[str | None] | None) -> int | None:
    """The smallest delta-seconds among a directive's values; None when none is one."""
    if not values:
        return None
    read = []
    for value in values:
        if value is None or not _DIGITS.fullmatch(value):
            continue
        digits = value.lstrip("0")
        read.append(MAX_SECONDS if len(digits) > 10 else min(int(digits or "0"), MAX_SECONDS))
    return min(read) if read else None
