"""Which requests the cache answers, and which of the vendor's answers it keeps and how long.

Only GET (a connection allows no HEAD), and not a request that asks for part of an answer or
sets its own conditions (``Range``, ``If-*``): the app's own cache is then at work, and the
vendor answers it. An app's
``Cache-Control`` does not bypass the cache (nginx's and Varnish's default: the cache protects
the vendor's quota, which any app could otherwise spend at will).

An answer is kept when its status is one RFC 9110 (15.1) lets a cache reuse by default, and its
``Cache-Control`` allows a shared cache to (no ``no-store``, no ``private``), it sets no cookie,
and it does not vary on everything (``Vary: *``). It stays fresh for the vendor's ``s-maxage``
or ``max-age``, or the connection's ``ttlSeconds`` where it names neither, never longer than the
connection's ``maxTTLSeconds``; ``no-cache`` keeps it only to revalidate it each time (and only
with a validator to do so); ``Expires`` stands in where neither max-age is given, and the
vendor's ``Age`` counts against max-age. ``no-cache`` and ``must-revalidate`` take away the stale
windows.

Gatehouse's requests carry a credential, and RFC 9111 (3.5) keeps a shared cache from reusing
answers to such requests unless they say it may: the connection's admin says so by turning the
cache on, and each answer stays the app's own (and the viewer's, where the credential is theirs)
unless the admin shares it between the connection's apps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from gatehouse_contract.routes import CachePolicy
from gatehouse_proxy.http.cache_control import MAX_SECONDS, cache_control, vary

CACHED_METHODS = frozenset({"GET"})
# Heuristically cacheable (RFC 9110 15.1), the redirects less (never followed, never relayed).
STORED_STATUSES = frozenset({200, 203, 204, 404, 405, 410, 414, 501})
_OWN_CONDITIONS = frozenset(
    {"range", "if-range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since"}
)


def bypassed(method: str, headers: Sequence[tuple[str, str]]) -> str:
    """Why a request goes past the cache ("" if it does not)."""
    if method not in CACHED_METHODS:
        return "method"
    if any(name.lower() in _OWN_CONDITIONS for name, _ in headers):
        return "conditional"
    return ""


@dataclass(frozen=True, slots=True)
class Lifetime:
    fresh: int  # seconds
    stale_while_revalidate: int
    stale_if_error: int
    vary: tuple[str, ...]  # request header names, lower case
    # How long past fresh an answer with a validator is kept to be revalidated: as long as it
    # was fresh, or the connection's ttlSeconds for one never fresh (no-cache).
    renewable: int = 0

    def kept_seconds(self, revalidatable: bool) -> int:
        """How long the store keeps the answer: while it may be served, and longer where a
        conditional request can renew it."""
        windows = max(self.stale_while_revalidate, self.stale_if_error)
        return self.fresh + max(windows, self.renewable if revalidatable else 0, 1)


def lifetime(
    policy: CachePolicy, status: int, headers: Sequence[tuple[str, str]], revalidatable: bool
) -> Lifetime | str:
    """How long an answer is kept, or why it is not."""
    if status not in STORED_STATUSES:
        return "status"
    lowered = [(name.lower(), value) for name, value in headers]
    if any(name == "set-cookie" for name, _ in lowered):
        return "set-cookie"
    directives = cache_control(value for name, value in lowered if name == "cache-control")
    if directives.no_store:
        return "no-store"
    if directives.private:
        return "private"
    varied = vary(value for name, value in lowered if name == "vary")
    if varied is None or varied == ("*",):
        return "vary"
    if directives.no_cache:
        if not revalidatable:
            return "no-cache"
        fresh = 0
    elif directives.max_age is not None:
        # What the vendor's own caches held it for already counts (RFC 9111 4.2.3).
        fresh = min(max(directives.max_age - _age(lowered), 0), policy.max_ttl_seconds)
    elif any(name == "expires" for name, _ in lowered):
        fresh = min(_until_expires(lowered), policy.max_ttl_seconds)
    else:
        fresh = min(policy.ttl_seconds, policy.max_ttl_seconds)
    if fresh == 0 and not revalidatable:
        return "max-age"
    # An answer to revalidate every time (no-cache), or that says so once stale
    # (must-revalidate), is never served stale.
    stale = not (directives.must_revalidate or directives.no_cache)
    return Lifetime(
        fresh=fresh,
        stale_while_revalidate=policy.stale_while_revalidate_seconds if stale else 0,
        stale_if_error=policy.stale_if_error_seconds if stale else 0,
        vary=varied,
        renewable=fresh or policy.ttl_seconds,
    )


def _age(headers: Sequence[tuple[str, str]]) -> int:
    """The answer's ``Age`` (RFC 9111 5.1), 0 when absent or not delta-seconds."""
    value = next((value.strip() for name, value in headers if name == "age"), "")
    if not value.isascii() or not value.isdigit():
        return 0
    return int(value) if len(value) <= 10 else MAX_SECONDS


def _until_expires(headers: Sequence[tuple[str, str]]) -> int:
    """Seconds until the answer's ``Expires`` (RFC 9111 5.3); 0 for a date past, or one that
    is none (``Expires: 0``), as the RFC asks."""
    value = next(value for name, value in headers if name == "expires")
    try:
        expires = parsedate_to_datetime(value[:64])
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0
    if expires.tzinfo is None:
        return 0
    return max(int(expires.timestamp() - time.time()), 0)
