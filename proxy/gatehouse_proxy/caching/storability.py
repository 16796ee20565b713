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
with a validator to do so). ``must-revalidate`` takes away the stale windows.

Gatehouse's requests carry a credential, and RFC 9111 (3.5) keeps a shared cache from reusing
answers to such requests unless they say it may: the connection's admin says so by turning the
cache on, and each answer stays the app's own (and the viewer's, where the credential is theirs)
unless the admin shares it between the connection's apps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gatehouse_contract.routes import CachePolicy
from gatehouse_proxy.http.cache_control import cache_control, vary

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

    def kept_seconds(self, revalidatable: bool) -> int:
        """How long the store keeps the answer: while it may be served, and as long again
        where a conditional request can renew it."""
        windows = max(self.stale_while_revalidate, self.stale_if_error)
        return self.fresh + max(windows, self.fresh if revalidatable else 0, 1)


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
        fresh = min(directives.max_age, policy.max_ttl_seconds)
    else:
        fresh = min(policy.ttl_seconds, policy.max_ttl_seconds)
    if fresh == 0 and not revalidatable:
        return "max-age"
    stale = not directives.must_revalidate
    return Lifetime(
        fresh=fresh,
        stale_while_revalidate=policy.stale_while_revalidate_seconds if stale else 0,
        stale_if_error=policy.stale_if_error_seconds if stale else 0,
        vary=varied,
    )
