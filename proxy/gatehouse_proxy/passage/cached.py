"""The cache's two steps on a request's way: before the limits, the cache consulted (a hit never
reaches the vendor, nor its quota); after the vendor's answer, what the fetcher does with it.

The answer kept is the one the app is sent: its body scrubbed of the credential (in every form
the redactor knows), its headers filtered as the relay filters them. So no secret rests in the
store, and a hit is the same bytes the fetcher's app got.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gatehouse_contract.redaction import Redactor
from gatehouse_contract.routes import CachePolicy, ConnectionRoute
from gatehouse_proxy.caching.answers import CachedAnswer
from gatehouse_proxy.caching.response_cache import Bypass, ResponseCache, Served, Turn
from gatehouse_proxy.caching.storability import Lifetime, bypassed, lifetime
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.rules import headers as header_policy
from gatehouse_proxy.rules.matcher import UpstreamPath
from gatehouse_proxy.upstream.forwarder import Upstream

# A vendor's failure a stale answer may stand in for (RFC 5861 4: stale-if-error).
_FAILURES = frozenset({500, 502, 503, 504})


async def consult(
    cache: ResponseCache,
    fetch: Fetch,
    connection: ConnectionRoute,
    path: UpstreamPath,
    outgoing: Sequence[tuple[str, str]],
    deadline: float,
) -> Served | Turn | None:
    """A cached answer, this request's turn to fetch one for the fleet, or None: go to the
    vendor and keep nothing. ``fetch.cache`` says which."""
    reason = bypassed(fetch.method, outgoing)
    if reason:
        fetch.cache = "bypass"
        return None
    whose = (fetch.app_uid, "" if fetch.viewer is None else fetch.viewer.owner)
    request = (path.encoded, fetch.query, outgoing)
    looked = await cache.look_up(connection, whose, request, deadline)
    if isinstance(looked, Bypass):
        fetch.cache = "bypass" if looked.reason == "store" else "miss"
        return None
    if isinstance(looked, Served):
        fetch.cache = looked.outcome
        return looked
    fetch.cache = "miss"
    return looked


def conditions(turn: Turn | None) -> list[tuple[str, str]]:
    """The fetcher's conditional headers, where it revalidates a stale answer."""
    return [] if turn is None or turn.stale is None else turn.stale.conditions()


async def settle(
    turn: Turn,
    connection: ConnectionRoute,
    upstream: Upstream,
    secrets: Sequence[str],
    now: float,
) -> Served | None:
    """The fetcher's answer kept for the fleet and served from what was kept (read whole,
    scrubbed), or None: relay it as it is (the waiters then go to the vendor themselves)."""
    policy = connection.cache
    assert policy is not None
    stale = turn.stale
    status = upstream.status
    if status == 304 and stale is not None:
        upstream.release()
        renewed, kept_for = _renewed(policy, stale, upstream.headers(), now)
        if isinstance(kept_for, str):
            await turn.pass_on(failed=False)
            return Served(renewed, "fwd=stale; fwd-status=304", "revalidated")
        await turn.keep(renewed, kept_for)
        return Served(renewed, "fwd=stale; fwd-status=304; stored", "revalidated")
    if status in _FAILURES and stale is not None and stale.usable_on_error(now):
        upstream.release()
        await turn.pass_on(failed=True)
        return Served(stale, f"hit; fwd=stale; fwd-status={status}; detail=stale-if-error", "stale")
    headers = upstream.headers()
    revalidatable = any(name.lower() in ("etag", "last-modified") for name, _ in headers)
    kept_for = lifetime(policy, status, headers, revalidatable)
    declared = upstream.response.content_length
    if isinstance(kept_for, str) or (declared is not None and declared > policy.max_body_bytes):
        await turn.pass_on(failed=status >= 500)
        return None
    body = await _whole(upstream)
    redact = Redactor(secrets) if secrets else None
    answer = CachedAnswer(
        status=status,
        headers=tuple(
            header_policy.app_response_headers(headers, redact, media_type=upstream.media_type)
        ),
        body=redact(body) if redact is not None else body,
        stored_at=now,
        fresh_until=now + kept_for.fresh,
        stale_while_revalidate=kept_for.stale_while_revalidate,
        stale_if_error=kept_for.stale_if_error,
        vary=tuple((name, turn.vary.get(name, "")) for name in kept_for.vary),
        etag=_first(headers, "etag"),
        last_modified=_first(headers, "last-modified"),
    )
    forwarded = "fwd=stale" if stale is not None else "fwd=uri-miss"
    if len(answer.body) > policy.max_body_bytes:
        await turn.pass_on(failed=False)
        return Served(answer, f"{forwarded}; fwd-status={status}; detail=too-large", "miss")
    await turn.keep(answer, kept_for)
    return Served(answer, f"{forwarded}; fwd-status={status}; stored", "miss")


async def stand_in(turn: Turn, error: ProxyError, now: float) -> Served | None:
    """A stale answer in place of a failed call (within its stale-if-error window), else None;
    either way the fetch is over for the fleet."""
    stale = turn.stale
    await turn.pass_on(failed=True)
    if stale is None or not stale.usable_on_error(now):
        return None
    return Served(
        stale, f"hit; fwd=stale; fwd-status={error.status}; detail=stale-if-error", "stale"
    )


def _renewed(
    policy: CachePolicy, stale: CachedAnswer, headers: Sequence[tuple[str, str]], now: float
) -> tuple[CachedAnswer, Lifetime | str]:
    """A stale answer a 304 confirmed, fresh again: for the 304's Cache-Control where it sends
    one, else the stored answer's (RFC 9111 4.3.4), its new validators in place of the old."""
    own = any(name.lower() == "cache-control" for name, _ in headers)
    kept_for = lifetime(policy, stale.status, headers if own else stale.headers, True)
    fresh = 0 if isinstance(kept_for, str) else kept_for.fresh
    renewed = replace(
        stale,
        stored_at=now,
        fresh_until=now + fresh,
        etag=_first(headers, "etag") or stale.etag,
        last_modified=_first(headers, "last-modified") or stale.last_modified,
    )
    return renewed, kept_for


async def _whole(upstream: Upstream) -> bytes:
    """The answer's body read whole, within the connection's largest answer."""
    whole = upstream.whole_body()
    if whole is not None:
        return whole
    return b"".join([chunk async for chunk in upstream.body()])


def _first(headers: Sequence[tuple[str, str]], name: str) -> str:
    return next((value for header, value in headers if header.lower() == name), "")
