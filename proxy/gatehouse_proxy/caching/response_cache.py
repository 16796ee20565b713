"""The fleet's response cache: an answer looked up before the vendor is called, identical misses
anywhere in the fleet coalesced onto one call, and that call's answer kept for all of them.

A request the cache may answer (:mod:`storability`) is looked up by its key's digest
(:mod:`answer_keys`). A fresh answer whose varied headers match is served (a *hit*). Otherwise
one request across every replica and worker takes the answer's lock in the store and goes to
the vendor (the *fetcher*), with a conditional request where a stale answer has a validator;
the others wait for its answer (*collapsed*): within a worker on the first one's future, across
the fleet by reading the store at a short, growing interval. The fetcher's lock lives
``LOCK_MS`` and is renewed every ``BEAT_SECONDS`` while its call runs: if its worker dies, the
lock ends within that, and one waiter takes the fetch over. No waiter waits past its own
deadline (the connection's timeout from its arrival): it is then answered ``upstream_timeout``.

When the fetch ends, the fetcher keeps the answer (:meth:`Turn.keep`) or, if it may not be kept
or the call failed, sets a *pass* marker for a while (:meth:`Turn.pass_on`): the waiters then go
to the vendor themselves, as nginx's ``proxy_cache_lock`` lets them, and so do identical
requests until the marker ends (a hit-for-pass, in Varnish's words), rather than queueing behind
a fetch whose answer none of them may share.

While the store is away, every request goes to the vendor, neither waiting nor kept, and none
fails for it: the store's own probe brings the cache back within seconds of its return.

Answers are encrypted in the store (AES-256-GCM under a key derived from the keyring's, the
answer's key as associated data: an answer cannot be moved to another key) and hold only what
the app was sent: the body scrubbed of the credential, the headers filtered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gatehouse_contract.keyring import KeyringError, KeyringFile
from gatehouse_contract.routes import ConnectionRoute, namespace_of
from gatehouse_proxy.caching.answer_keys import AnswerKeys
from gatehouse_proxy.caching.answers import CachedAnswer, UnreadableAnswer
from gatehouse_proxy.caching.storability import Lifetime
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.observation import metrics
from gatehouse_proxy.store.answer_store import PASS_MS, AnswerStore
from gatehouse_proxy.store.shared_store import StoreUnavailable

log = logging.getLogger("gatehouse.proxy.cache")

_PURPOSE = b"gatehouse/cached-answers"
LOCK_MS = 3000
BEAT_SECONDS = 1.0
# How long identical requests go straight to the vendor after an answer that may not be kept
# (answer_store.PASS_MS), and after a fetch that failed (much shorter: only to let the waiters
# go, to a stale answer where one may stand in, else to the vendor).
FAILED_PASS_MS = 1_000
# The fleet's waiters read the store first after FIRST_POLL, each wait half again as long as
# the last, at most LAST_POLL.
FIRST_POLL = 0.005
LAST_POLL = 0.1
# A request answered with an identical request's fetch (RFC 9211 2.8).
COLLAPSED = "fwd=uri-miss; collapsed"
# Requests of one worker waiting on one answer at most; past it they go to the vendor.
MOST_WAITING = 1024


@dataclass(frozen=True, slots=True)
class Served:
    """An answer from the cache; ``status``: its Cache-Status (RFC 9211) parameters;
    ``outcome``: what the cache did, as the fetch records it (Fetch.cache)."""

    answer: CachedAnswer
    status: str
    outcome: str


@dataclass(frozen=True, slots=True)
class Bypass:
    """Go to the vendor; keep nothing."""

    reason: str


@dataclass(slots=True)
class Turn:
    """This request fetches the answer for the fleet: ``stale`` is the answer it may revalidate
    (or serve if the vendor fails, within its stale-if-error window)."""

    cache: ResponseCache
    namespace: str
    digest: str
    token: str
    stale: CachedAnswer | None
    vary: dict[str, str]
    beat: asyncio.Task[None] | None = None
    done: bool = False

    async def keep(self, answer: CachedAnswer, lifetime: Lifetime) -> None:
        """The fetched answer kept for the fleet; the lock given back."""
        await self.cache._keep(self, answer, lifetime)

    async def pass_on(self, *, failed: bool, standing_in: Served | None = None) -> None:
        """The answer is not kept: identical requests go to the vendor for a while. After an
        answer that may not be kept, the one kept before is dropped; after a failed fetch
        (``failed``) it is left to stand in within its stale-if-error window: this worker's
        waiters are given ``standing_in``, the fleet's read it."""
        await self.cache._pass_on(self, failed=failed, standing_in=standing_in)

    async def release(self) -> None:
        """The lock given back with nothing kept (the request was refused before the vendor):
        a waiter takes the fetch over."""
        await self.cache._end(self, None, unlock=True)


class ResponseCache:
    def __init__(
        self,
        store: AnswerStore | None,
        keyring: KeyringFile,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.keyring = keyring
        self.clock = clock
        self.keys = AnswerKeys()
        # The first waiting request of this worker per answer: the others wait on its outcome.
        self._flights: dict[str, asyncio.Future[Served | None]] = {}
        self._waiting: dict[str, int] = {}
        # The stale answers this worker's fetches are revalidating, for the stale-while-revalidate
        # window: its other requests are answered with them meanwhile.
        self._revalidating: dict[str, CachedAnswer] = {}

    async def look_up(
        self,
        connection: ConnectionRoute,
        whose: tuple[str, str],
        request: tuple[str, bytes, Sequence[tuple[str, str]]],
        deadline: float,
    ) -> Served | Turn | Bypass:
        """A fresh answer, this request's turn to fetch it, or a bypass. ``whose``: the app's
        uid and the viewer's owner name ("" none); ``request``: the path as sent upstream, the
        query and the headers the vendor will be sent; ``deadline``: time.monotonic()."""
        store = self.store
        if store is None or not store.store.up:
            return Bypass("store")
        path, query, headers = request
        namespace = namespace_of(connection.key)
        digest = self.keys.digest(connection, whose[0], whose[1], path, query)
        vary = _request_headers(headers)
        flight = self._flights.get(digest)
        if flight is not None:
            stale = self._revalidating.get(digest)
            if stale is not None and stale.matches(vary):
                served = _while_revalidating(stale, self.clock())
                if served is not None:
                    return served
            return await self._follow(flight, digest, vary, deadline)
        flight = asyncio.get_running_loop().create_future()
        self._flights[digest] = flight
        outcome: Served | Turn | Bypass = Bypass("store")
        try:
            outcome = await self._lead(namespace, digest, vary, deadline)
        finally:
            # A turn's flight ends with its fetch (Turn.keep, pass_on, release); any other now.
            if not isinstance(outcome, Turn):
                self._land(digest, outcome if isinstance(outcome, Served) else None)
        return outcome

    async def _follow(
        self,
        flight: asyncio.Future[Served | None],
        digest: str,
        vary: dict[str, str],
        deadline: float,
    ) -> Served | Bypass:
        """This worker's request behind its first one: what that one was served (a hit is a
        hit for both; a fetch's answer is this one's collapsed wait)."""
        waiting = self._waiting.get(digest, 0)
        if waiting >= MOST_WAITING:
            return Bypass("waiters")
        self._waiting[digest] = waiting + 1
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                served = await asyncio.shield(flight)
        except TimeoutError:
            raise _waited_too_long() from None
        finally:
            self._waiting[digest] -= 1
            if not self._waiting[digest]:
                del self._waiting[digest]
        if served is None or not served.answer.matches(vary):
            return Bypass("pass")
        return served

    async def _lead(
        self, namespace: str, digest: str, vary: dict[str, str], deadline: float
    ) -> Served | Turn | Bypass:
        """The fleet's protocol for this worker's first request: read, lock, or wait."""
        store = self.store
        assert store is not None
        pause = FIRST_POLL
        waited = False
        while True:
            try:
                stored = await store.read(namespace, digest)
            except StoreUnavailable:
                return Bypass("store")
            answer = self._decrypted(namespace, digest, stored.ciphertext)
            now = self.clock()
            selected = answer if answer is not None and answer.matches(vary) else None
            if selected is not None and selected.fresh(now):
                if waited:
                    return Served(selected, COLLAPSED, "collapsed")
                return Served(selected, f"hit; ttl={int(selected.fresh_until - now)}", "hit")
            failing = stored.marker == "failing"
            if failing and selected is not None and selected.usable_on_error(now):
                return stale_answer(selected, now, "stale-if-error")
            if stored.marker:
                return Bypass("pass")
            if selected is not None and stored.lock_ms > 0:
                # Another worker revalidates it: within the window, the stale answer now.
                served = _while_revalidating(selected, now)
                if served is not None:
                    return served
            if stored.lock_ms <= 0:
                token = secrets.token_hex(16)
                try:
                    taken = await store.lock(namespace, digest, token, LOCK_MS, stored.serial)
                except StoreUnavailable:
                    return Bypass("store")
                if taken == 0:
                    turn = Turn(self, namespace, digest, token, selected, vary)
                    turn.beat = asyncio.create_task(self._beat(turn), name="cache-lock-beat")
                    if selected is not None:
                        self._revalidating[digest] = selected
                    return turn
                if taken == -2:
                    return Bypass("pass")
                if taken == -3:
                    continue  # kept meanwhile: read it
            waited = True
            left = deadline - time.monotonic()
            if left <= 0:
                raise _waited_too_long()
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 1.5, LAST_POLL)

    async def _beat(self, turn: Turn) -> None:
        """Keeps the fetcher's lock while its call runs."""
        store = self.store
        assert store is not None
        while True:
            await asyncio.sleep(BEAT_SECONDS)
            try:
                if not await store.beat(turn.namespace, turn.digest, turn.token, LOCK_MS):
                    return  # no longer this fetch's: it ended, or its lock lapsed
            except StoreUnavailable:
                continue  # one late beat: the lock outlives two of them

    async def _keep(self, turn: Turn, answer: CachedAnswer, lifetime: Lifetime) -> None:
        store = self.store
        assert store is not None
        serial = secrets.token_hex(8)
        ciphertext = self.keyring.current().encrypt_compact(
            _PURPOSE, answer.encode(), _context(turn.namespace, turn.digest)
        )
        ms = lifetime.kept_seconds(answer.revalidatable) * 1000
        try:
            kept = await store.keep(
                turn.namespace, turn.digest, (ciphertext, serial), ms, turn.token
            )
        except StoreUnavailable:
            await self._end(turn, answer, unlock=False)
            return
        metrics.count_cache_kept(kept.outcome, kept.evicted)
        # Not kept for want of room, it is still this fetch's answer for its worker's waiters.
        await self._end(turn, answer, unlock=False)

    async def _pass_on(self, turn: Turn, *, failed: bool, standing_in: Served | None) -> None:
        store = self.store
        assert store is not None
        ms = FAILED_PASS_MS if failed else PASS_MS
        with contextlib.suppress(StoreUnavailable):
            await store.pass_on(turn.namespace, turn.digest, turn.token, ms, failing=failed)
        await self._end(turn, None, unlock=False, served=standing_in)

    async def _end(
        self,
        turn: Turn,
        answer: CachedAnswer | None,
        *,
        unlock: bool,
        served: Served | None = None,
    ) -> None:
        """The fetch is over for the fleet; this worker's waiters are given ``answer`` as a
        collapsed wait's, or ``served`` (neither: they go to the vendor)."""
        if turn.done:
            return
        turn.done = True
        if turn.beat is not None:
            turn.beat.cancel()
        # This worker's waiters first: nothing below may keep them waiting (a cancelled unlock).
        self._land(
            turn.digest, served if answer is None else Served(answer, COLLAPSED, "collapsed")
        )
        if unlock and self.store is not None:
            with contextlib.suppress(StoreUnavailable):
                await self.store.unlock(turn.namespace, turn.digest, turn.token)

    def _land(self, digest: str, served: Served | None) -> None:
        """Ends this worker's flight for ``digest``: its waiters are given ``served`` (None: go
        to the vendor)."""
        self._revalidating.pop(digest, None)
        flight = self._flights.pop(digest, None)
        if flight is not None and not flight.done():
            flight.set_result(served)

    def _decrypted(self, namespace: str, digest: str, ciphertext: bytes) -> CachedAnswer | None:
        if not ciphertext:
            return None
        try:
            return CachedAnswer.decode(
                self.keyring.decrypt_compact(_PURPOSE, ciphertext, _context(namespace, digest))
            )
        except (KeyringError, UnreadableAnswer) as error:
            # A key rotated away, or another release's format: a miss, fetched and kept anew.
            log.debug("a cached answer could not be read: %s", type(error).__name__)
            return None


def _while_revalidating(stale: CachedAnswer, now: float) -> Served | None:
    """A stale answer served while one request revalidates it, within its window (RFC 5861 3)."""
    if not stale.usable_while_revalidating(now):
        return None
    return stale_answer(stale, now, "stale-while-revalidate")


def stale_answer(stale: CachedAnswer, now: float, why: str) -> Served:
    """A stale answer served without going to the vendor; a negative ttl says it is stale
    (RFC 9211 2.3)."""
    return Served(stale, f"hit; ttl={math.floor(stale.fresh_until - now)}; detail={why}", "stale")


def _context(namespace: str, digest: str) -> bytes:
    return f"{namespace}\0{digest}".encode()


def _request_headers(headers: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The request's headers as an answer's Vary compares them: names lower case, the lines of
    one name joined."""
    joined: dict[str, str] = {}
    for name, value in headers:
        lowered = name.lower()
        joined[lowered] = f"{joined[lowered]}, {value}" if lowered in joined else value
    return joined


def _waited_too_long() -> ProxyError:
    return ProxyError(
        "upstream_timeout", "an identical request's answer from the upstream did not arrive in time"
    )
