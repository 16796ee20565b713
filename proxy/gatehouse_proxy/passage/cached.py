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
from gatehouse_proxy.caching.response_cache import (
    Bypass,
    ResponseCache,
    Served,
    Turn,
    stale_answer,
)
from gatehouse_proxy.caching.storability import STORED_STATUSES, Lifetime, bypassed, lifetime
from gatehouse_proxy.credentials.injectors import sends_credential
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
    request = (path.encoded, fetch.query, _as_sent(connection, outgoing))
    looked = await cache.look_up(connection, whose, request, deadline)
    if isinstance(looked, Bypass):
        fetch.cache = "bypass" if looked.reason == "store" else "miss"
        return None
    if isinstance(looked, Served):
        fetch.cache = looked.outcome
        return looked
    fetch.cache = "miss"
    return looked


def _as_sent(
    connection: ConnectionRoute, outgoing: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The headers an answer's Vary is compared on, as the vendor receives them: a credentialed
    request asks for ``Accept-Encoding: identity`` whatever the app asked (passage.sending), so
    that an echoed credential can be scrubbed."""
    if not sends_credential(connection):
        return list(outgoing)
    kept = [(name, value) for name, value in outgoing if name.lower() != "accept-encoding"]
    return [*kept, ("Accept-Encoding", "identity")]


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
    redact = Redactor(secrets) if secrets else None
    if status == 304 and stale is not None:
        upstream.release()
        relayed = header_policy.app_response_headers(upstream.headers(), redact, media_type=None)
        renewed, kept_for = _renewed(policy, stale, relayed, now)
        if isinstance(kept_for, str):
            await turn.pass_on(failed=False)
            return Served(renewed, "fwd=stale; fwd-status=304", "revalidated")
        await turn.keep(renewed, kept_for)
        return Served(renewed, "fwd=stale; fwd-status=304; stored", "revalidated")
    if status not in STORED_STATUSES:
        # A failure, or a refusal (429, a 4xx): the answer kept before stays, for the
        # stale-if-error window where this is a vendor's failure.
        if status in _FAILURES:
            standing_in = await _stand_in(turn, status, now)
            if standing_in is not None:
                upstream.release()
                return standing_in
        await turn.pass_on(failed=True)
        return None
    headers = upstream.headers()
    revalidatable = any(name.lower() in ("etag", "last-modified") for name, _ in headers)
    kept_for = lifetime(policy, status, headers, revalidatable)
    declared = upstream.response.content_length
    if isinstance(kept_for, str) or (declared is not None and declared > policy.max_body_bytes):
        await turn.pass_on(failed=False)
        return None
    # No more than the largest body kept is held: past it, the answer streams as relayed.
    body = await upstream.read_up_to(policy.max_body_bytes)
    if body is None:
        await turn.pass_on(failed=False)
        return None
    relayed = header_policy.app_response_headers(headers, redact, media_type=upstream.media_type)
    answer = CachedAnswer(
        status=status,
        headers=tuple(relayed),
        body=redact(body) if redact is not None else body,
        stored_at=now,
        fresh_until=now + kept_for.fresh,
        stale_while_revalidate=kept_for.stale_while_revalidate,
        stale_if_error=kept_for.stale_if_error,
        vary=tuple((name, turn.vary.get(name, "")) for name in kept_for.vary),
        # From the headers as scrubbed: a validator that echoes the credential keeps none of it.
        etag=_first(relayed, "etag"),
        last_modified=_first(relayed, "last-modified"),
    )
    forwarded = "fwd=stale" if stale is not None else "fwd=uri-miss"
    await turn.keep(answer, kept_for)
    return Served(answer, f"{forwarded}; fwd-status={status}; stored", "miss")


async def stand_in(turn: Turn, error: ProxyError, now: float) -> Served | None:
    """A stale answer in place of a failed call (within its stale-if-error window), else None;
    either way the fetch is over for the fleet."""
    standing_in = await _stand_in(turn, error.status, now)
    if standing_in is None:
        await turn.pass_on(failed=True)
    return standing_in


async def _stand_in(turn: Turn, status: int, now: float) -> Served | None:
    """The stale answer, for this request and for every identical one until the next fetch,
    where its stale-if-error window allows; None otherwise (nothing done)."""
    stale = turn.stale
    if stale is None or not stale.usable_on_error(now):
        return None
    await turn.pass_on(failed=True, standing_in=stale_answer(stale, now, "stale-if-error"))
    return Served(stale, f"fwd=stale; fwd-status={status}; detail=stale-if-error", "stale")


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


def _first(headers: Sequence[tuple[str, str]], name: str) -> str:
    return next((value for header, value in headers if header.lower() == name), "")
