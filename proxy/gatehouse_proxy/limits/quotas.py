"""A connection's quotas, counted once for the whole fleet: what a vendor meters is the credential,
not the proxy's Pods.

- ``limits.requestsPerMinute``: per (connection, app), across every replica and worker;
- ``limits.connectionRequestsPerMinute``: all apps on the connection together (the vendor's quota
  for the credential);
- ``limits.requestsPerDay``: the connection's, per UTC day, kept across restarts and rollouts;
- the vendor's own word: an upstream 429 or 503 with ``Retry-After`` pauses the endpoint it came
  on, or the whole connection when it is the credential's limit (see :meth:`Quotas.pause` and
  :mod:`gatehouse_proxy.limits.vendor_pauses`), for the fleet; apps get 429 with the time left and
  the vendor is not called.

Each request costs one round trip to the store at most: the requests that arrive in one turn of
the event loop go in one pipeline (see :mod:`gatehouse_proxy.limits.quota_script` for the count
itself). Answers say where the app stands (``RateLimit-Limit``, ``-Remaining``, ``-Reset``, the IETF
draft's fields), and refusals when to come back (``Retry-After``).

While the store cannot answer in time, each worker counts alone and admits its share: each limit
divided by the replicas x workers the operator counts on the table channel. It says so (the
store's state in /readyz and a metric) and counts together again as soon as the store answers.
A namespace whose share of the store is full (:mod:`gatehouse_proxy.store.shares`) has the
requests that would need a new key there counted the same way, alone, and no other namespace.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from gatehouse_contract.frames import PauseScope
from gatehouse_contract.routes import ConnectionRoute, namespace_of
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.limits.quota_script import ENDPOINT_PAUSE_SOURCE, PAUSE_SOURCE, SOURCE
from gatehouse_proxy.observation import metrics
from gatehouse_proxy.store.shared_store import (
    Arg,
    Script,
    SharedStore,
    StoreFull,
    StoreUnavailable,
    digest_field,
)
from gatehouse_proxy.store.shares import LEDGER, Shares, ShareSettings, prefix

WINDOW_SECONDS = 60
DAY_SECONDS = 86400
# The most endpoints of a connection paused at once: a vendor asking to wait on more is limiting
# the credential, and the whole connection is paused (and the store holds a bounded hash).
MAX_PAUSED_ENDPOINTS = 64
_COUNT = Script(LEDGER + SOURCE)
_PAUSE = Script(LEDGER + PAUSE_SOURCE)
_PAUSE_ENDPOINT = Script(LEDGER + ENDPOINT_PAUSE_SOURCE)
PAUSED, ENDPOINT_PAUSED = 4, 5
NO_ROOM = 6  # the namespace's share of the store has no room for a new key: counted alone
_DECIDED_BY = {1: "app", 2: "connection", 3: "day", PAUSED: "pause", ENDPOINT_PAUSED: "endpoint"}
# The script's answer: its numbers, and the endpoints the fleet holds paused (ms left).
_Counted = tuple[list[int], dict[str, int]]


@dataclass(frozen=True)
class Standing:
    """Where the request leaves its tightest quota: for the RateLimit-* answer fields."""

    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"ratelimit-limit", str(self.limit).encode()),
            (b"ratelimit-remaining", str(max(self.remaining, 0)).encode()),
            (b"ratelimit-reset", str(self.reset_seconds).encode()),
        ]


NO_LIMIT = Standing(0, 0, 0)


def store_keys(connection: ConnectionRoute, app_uid: str) -> list[str]:
    """A connection's keys, in its namespace's slot (with the namespace's ledger, for one Redis
    Cluster slot per script): the pause, the app's minute, the connection's minute, its day and
    its endpoints' pauses. Named by the namespace and uids, nothing else (an endpoint is a field
    of the last, named by its digest)."""
    tag = f"{prefix(namespace_of(connection.key))}{connection.uid}"
    return [
        f"{tag}:pause",
        f"{tag}:app:{app_uid}",
        f"{tag}:minute",
        f"{tag}:day",
        f"{tag}:pauses",
    ]


class _Minute:
    """A sliding minute of one-second buckets, the oldest weighted: the store's count, kept in a
    worker while the store is away."""

    __slots__ = ("buckets", "total")

    def __init__(self) -> None:
        self.buckets: collections.deque[list[int]] = collections.deque()  # [second, count]
        self.total = 0

    def used(self, now: float) -> float:
        second = math.floor(now)
        while self.buckets and self.buckets[0][0] < second - WINDOW_SECONDS:
            self.total -= self.buckets.popleft()[1]
        edge = (
            self.buckets[0][1]
            if self.buckets and self.buckets[0][0] == second - WINDOW_SECONDS
            else 0
        )
        return self.total - edge * (now - second)

    def add(self, now: float) -> None:
        second = math.floor(now)
        if self.buckets and self.buckets[-1][0] == second:
            self.buckets[-1][1] += 1
        else:
            self.buckets.append([second, 1])
        self.total += 1


class Alone:
    """The counts of one worker while the store is away: its share of each limit."""

    def __init__(self) -> None:
        self.minutes: dict[tuple[str, str], _Minute] = {}
        self.days: dict[str, tuple[int, int]] = {}  # connection uid -> (day, count)
        self.paused: dict[str, float] = {}  # connection uid -> until (time.time())
        # connection uid -> endpoint -> until (time.time()), at most MAX_PAUSED_ENDPOINTS each
        self.paused_endpoints: dict[str, dict[str, float]] = {}

    def pause_left(self, connection_uid: str, endpoint: str) -> tuple[float, int]:
        """The seconds left of a pause this worker keeps on the connection, or else on the
        endpoint, and which (PAUSED, ENDPOINT_PAUSED); 0 when neither is paused."""
        now = time.time()
        whole = self.paused.get(connection_uid, 0.0) - now
        if whole > 0:
            return whole, PAUSED
        own = self.paused_endpoints.get(connection_uid, {}).get(endpoint, 0.0) - now
        return (own, ENDPOINT_PAUSED) if endpoint and own > 0 else (0.0, 0)

    def admit(
        self,
        connection: ConnectionRoute,
        app_uid: str,
        limits: tuple[int, int, int],
        fleet: int,
        endpoint: str = "",
    ) -> tuple[int, int, int, int, int]:
        """As the script answers, for this worker's share."""
        left, which = self.pause_left(connection.uid, endpoint)
        if left > 0:
            return 0, 0, 0, math.ceil(left * 1000), which
        return self.count(connection, app_uid, limits, fleet)

    def count(
        self, connection: ConnectionRoute, app_uid: str, limits: tuple[int, int, int], fleet: int
    ) -> tuple[int, int, int, int, int]:
        """:meth:`admit` for a request whose pauses were looked up already, in the same step of
        the loop (nothing can have paused the connection since)."""
        now = time.time()
        tightest = (0, 2**31, 0, 0)
        counted: list[_Minute] = []
        minutes = self.minutes
        for which, (scope, limit) in enumerate(((app_uid, limits[0]), ("", limits[1])), 1):
            if not limit:
                continue
            share = max(1, limit // fleet)
            minute = minutes.get((connection.uid, scope))
            if minute is None:
                minute = minutes[connection.uid, scope] = _Minute()
            used = minute.used(now)
            if used + 1 > share:
                return 0, share, 0, 1, which
            if share - used - 1 < tightest[1]:
                tightest = (share, math.floor(share - used - 1), WINDOW_SECONDS, which)
            counted.append(minute)
        daily = limits[2]
        today = int(now // DAY_SECONDS)
        day, count = self.days.get(connection.uid, (today, 0))
        count = count if day == today else 0
        day_left = DAY_SECONDS - int(now % DAY_SECONDS)
        if daily:
            share = max(1, daily // fleet)
            if count + 1 > share:
                return 0, share, 0, day_left, 3
            if share - count - 1 < tightest[1]:
                tightest = (share, share - count - 1, day_left, 3)
            self.days[connection.uid] = (today, count + 1)
        for minute in counted:
            minute.add(now)
        return 1, *tightest

    def pause(self, connection_uid: str, seconds: float) -> None:
        until = time.time() + seconds
        self.paused[connection_uid] = max(self.paused.get(connection_uid, 0.0), until)

    def pause_endpoint(self, connection_uid: str, endpoint: str, seconds: float) -> PauseScope:
        """As the store's script: the endpoint, or the whole connection when as many endpoints
        as it may hold are paused already."""
        now = time.time()
        paused = {
            known: until
            for known, until in self.paused_endpoints.get(connection_uid, {}).items()
            if until > now
        }
        if endpoint not in paused and len(paused) >= MAX_PAUSED_ENDPOINTS:
            self.pause(connection_uid, seconds)
            return "credential"
        paused[endpoint] = max(paused.get(endpoint, 0.0), now + seconds)
        self.paused_endpoints[connection_uid] = paused
        return "endpoint"

    def forget(self, connection_uids: set[str]) -> None:
        self.minutes = {
            key: value for key, value in self.minutes.items() if key[0] in connection_uids
        }
        self.days = {uid: value for uid, value in self.days.items() if uid in connection_uids}
        now = time.time()
        self.paused = {
            uid: until
            for uid, until in self.paused.items()
            if uid in connection_uids and until > now
        }
        self.paused_endpoints = {
            uid: {endpoint: until for endpoint, until in paused.items() if until > now}
            for uid, paused in self.paused_endpoints.items()
            if uid in connection_uids
        }


@dataclass
class _Lease:
    """Permits a worker took at once for one (connection, app), counted in the store already."""

    left: int
    until: float  # the loop's clock: when its bucket ends in the store
    size: int  # how many it was granted
    bucket: int  # the store's bucket, and the day, they were counted in (for the refund)
    day: int
    limit: int
    remaining: int  # of the tightest quota once all were granted
    reset_seconds: int

    def take(self) -> Standing:
        self.left -= 1
        return Standing(self.limit, self.remaining + self.left, self.reset_seconds)


class Quotas:
    def __init__(
        self,
        store: SharedStore | None,
        fleet: Callable[[], int],
        lease_share: float = 0.01,
        shares: Shares | None = None,
    ) -> None:
        """``fleet()``: the replicas x workers the operator counts (the table channel's
        heartbeats say), each worker's share of a limit while the store is away.
        ``lease_share``: what all of a connection's outstanding leases may hold at most, as a
        share of its tightest limit. Permits taken and not yet used are counted, so they can
        only make the fleet admit less, and by at most this much (handed back with the worker's
        next call for the key); 0 asks the store for every request."""
        self.store = store
        self.shares = shares or Shares(ShareSettings())
        self.lease_share = lease_share
        self.alone = Alone()
        self.fleet = fleet
        self.window_seconds = WINDOW_SECONDS
        self._batch: list[tuple[list[str], list[Arg], asyncio.Future[_Counted]]] = []
        self._leases: dict[tuple[str, str], _Lease] = {}
        self._taking: dict[tuple[str, str], asyncio.Lock] = {}
        self._refused: dict[tuple[str, str], tuple[float, ProxyError]] = {}
        # Connection uid -> the endpoints the fleet holds paused (their fields) -> until (the
        # loop's clock), as the store's last answer for the connection said: a permit from a
        # lease is not given to an endpoint another worker heard paused.
        self._fleet_paused: dict[str, dict[str, float]] = {}

    async def admit(
        self, connection: ConnectionRoute, app_uid: str, endpoint: str = ""
    ) -> Standing:
        """Counts the request to ``endpoint`` (see gatehouse_proxy.rules.matcher.endpoint_of; "": no
        endpoint's pause applies), or raises ProxyError ``rate_limited`` with when to come
        back."""
        limits = connection.limits
        quota = (
            limits.requests_per_minute,
            limits.connection_requests_per_minute,
            limits.requests_per_day,
        )
        paused, which = self.alone.pause_left(connection.uid, endpoint)
        if paused > 0:  # this worker heard the vendor itself: no need to ask the store
            raise _refusal(0, math.ceil(paused * 1000), _DECIDED_BY[which], endpoint)
        paused = self._paused_in_fleet(connection.uid, endpoint)
        if paused > 0:
            raise _refusal(0, math.ceil(paused * 1000), "endpoint", endpoint)
        if self.store is None or not self.store.up:
            # Its pauses were looked up just above, in this step of the loop.
            counted = self._alone(connection, app_uid, quota, endpoint, looked_up=True)
            return _standing(counted, endpoint)
        key = (connection.uid, app_uid)
        known = self._known(key)
        if known is not None:
            return known
        turn = self._taking.setdefault(key, asyncio.Lock())
        async with turn:
            try:
                return await self._leased(connection, app_uid, key, quota, endpoint)
            except StoreFull:
                self.shares.refused(namespace_of(connection.key), "counters", "full")
                return _standing(self._alone(connection, app_uid, quota, endpoint), endpoint)
            except StoreUnavailable:
                return _standing(self._alone(connection, app_uid, quota, endpoint), endpoint)

    async def _leased(
        self,
        connection: ConnectionRoute,
        app_uid: str,
        key: tuple[str, str],
        quota: tuple[int, int, int],
        endpoint: str,
    ) -> Standing:
        """A permit from a lease: this worker's current one if it has one left (another request
        may have taken a new one while this one waited its turn), else a new one from the store,
        handing back what the last one left unused."""
        known = self._known(key)  # what a request before this one in its turn learned
        if known is not None:
            return known
        loop = asyncio.get_running_loop()
        lease = self._leases.get(key)
        want = self._lease_size(lease, quota)
        refund = (
            (lease.left, lease.bucket, lease.day)
            if lease is not None and lease.left
            else (0, -1, -1)
        )
        args: list[Arg] = [
            *quota,
            self.window_seconds,
            want,
            *refund,
            digest_field(endpoint) if endpoint else "",
            *self.shares.limits,
        ]
        self._leases.pop(key, None)
        namespace = namespace_of(connection.key)
        answer, paused = await self._counted(
            [*store_keys(connection, app_uid), *self.shares.keys(namespace)], args
        )
        admitted, limit, remaining, reset, which, granted, bucket, valid_ms, day = answer
        self._fleet_paused[connection.uid] = {
            field: loop.time() + left / 1000 for field, left in paused.items()
        }
        if which == NO_ROOM:
            self.shares.refused(namespace, "counters", "share")
            return _standing(self._alone(connection, app_uid, quota, endpoint), endpoint)
        if not admitted:
            refusal = _refusal(limit, reset, _DECIDED_BY.get(which, "app"), endpoint)
            if which not in (PAUSED, ENDPOINT_PAUSED):
                # Nothing frees room before the bucket ends (but a refund): the worker's other
                # requests for the key meanwhile are refused without asking the store again.
                self._refused[key] = (loop.time() + valid_ms / 1000, refusal)
            raise refusal
        if not limit:
            return NO_LIMIT
        taken = _Lease(
            granted, loop.time() + valid_ms / 1000, granted, bucket, day, limit, remaining, reset
        )
        self._leases[key] = taken
        return taken.take()

    def _paused_in_fleet(self, connection_uid: str, endpoint: str) -> float:
        """The seconds left of the fleet's pause of ``endpoint``, as the store last said."""
        paused = self._fleet_paused.get(connection_uid)
        if not paused or not endpoint:
            return 0.0
        return paused.get(digest_field(endpoint), 0.0) - asyncio.get_running_loop().time()

    def _known(self, key: tuple[str, str]) -> Standing | None:
        """A permit of this worker's lease, or its refusal raised again, while either holds;
        None when the store must be asked."""
        now = asyncio.get_running_loop().time()
        lease = self._leases.get(key)
        if lease is not None and lease.left and now < lease.until:
            return lease.take()
        refused = self._refused.get(key)
        if refused is not None:
            if now < refused[0]:
                raise refused[1].again()
            del self._refused[key]
        return None

    def _lease_size(self, last: _Lease | None, quota: tuple[int, int, int]) -> int:
        """One permit at a time, unless the last lease ran out before its bucket ended: then
        twice as many, up to what keeps the fleet exact (lease_share of the tightest limit,
        shared by every worker)."""
        fleet = self.fleet()
        if last is None or not fleet:
            # Not yet told how many share the limit (the first heartbeat): one at a time.
            return 1
        cap = max(1, int(min(limit for limit in quota if limit) * self.lease_share / fleet))
        if last.left:
            return max(1, min(last.size - last.left, cap))
        return min(last.size * 2, cap)

    def _alone(
        self,
        connection: ConnectionRoute,
        app_uid: str,
        quota: tuple[int, int, int],
        endpoint: str,
        *,
        looked_up: bool = False,
    ) -> tuple[int, ...]:
        """This worker's own count; ``looked_up``: the pauses were looked up already."""
        metrics.count_alone(connection.key)
        fleet = max(self.fleet(), 1)
        if looked_up:
            return self.alone.count(connection, app_uid, quota, fleet)
        return self.alone.admit(connection, app_uid, quota, fleet, endpoint)

    async def _counted(self, keys: list[str], args: list[Arg]) -> _Counted:
        """One script's answer, sent with the others of this turn of the loop in one pipeline
        (whose deadline is each request's: see _send)."""
        future: asyncio.Future[_Counted] = asyncio.get_running_loop().create_future()
        if not self._batch:
            asyncio.get_running_loop().call_soon(self._flush)
        self._batch.append((keys, args, future))
        return await future

    def _flush(self) -> None:
        batch, self._batch = self._batch, []
        task = asyncio.ensure_future(self._send(batch))
        task.add_done_callback(_retrieve)

    async def _send(
        self, batch: list[tuple[list[str], list[Arg], asyncio.Future[_Counted]]]
    ) -> None:
        assert self.store is not None
        try:
            answers = await self.store.run_many(_COUNT, [(keys, args) for keys, args, _ in batch])
            counted = [_read(answer) for answer in answers]
        except Exception as error:  # any: every request waiting must be answered
            cause = str(error) if isinstance(error, StoreUnavailable) else type(error).__name__
            unavailable = StoreFull if isinstance(error, StoreFull) else StoreUnavailable
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(unavailable(cause))
            return
        for (_, _, future), answer in zip(batch, counted, strict=True):
            if not future.done():
                future.set_result(answer)

    async def pause(
        self, connection: ConnectionRoute, seconds: float, endpoint: str = ""
    ) -> PauseScope | None:
        """The vendor said to wait (429 or 503 with Retry-After): nobody calls ``endpoint`` (or,
        "", the whole connection) until then. Returns what is paused when this is news to this
        worker (not a pause it already keeps), else None. ``seconds``: as
        :mod:`gatehouse_proxy.http.retry_after` read it, bounded there."""
        if seconds <= 0:
            return None
        left = self.alone.pause_left(connection.uid, endpoint)[0]
        if left > 0 and left >= seconds - 1:
            return None
        scope: PauseScope = "credential"
        if endpoint:
            scope = self.alone.pause_endpoint(connection.uid, endpoint, seconds)
            scope = await self._pause_endpoint_in_store(connection, endpoint, seconds, scope)
        if scope == "credential":
            self._pause_connection(connection, seconds)
            if self.store is not None and self.store.up:
                namespace = namespace_of(connection.key)
                with contextlib.suppress(StoreUnavailable):
                    kept = await self.store.run(
                        _PAUSE,
                        [store_keys(connection, "")[0], *self.shares.keys(namespace)],
                        [int(seconds * 1000), *self.shares.limits],
                    )
                    if not kept:  # this worker keeps it alone: the others hear the vendor too
                        self.shares.refused(namespace, "counters", "share")
        metrics.count_pause(connection.key, scope)
        return scope

    def _pause_connection(self, connection: ConnectionRoute, seconds: float) -> None:
        self.alone.pause(connection.uid, seconds)
        for key in [key for key in self._leases if key[0] == connection.uid]:
            del self._leases[key]
        for key in [key for key in self._refused if key[0] == connection.uid]:
            del self._refused[key]

    async def _pause_endpoint_in_store(
        self, connection: ConnectionRoute, endpoint: str, seconds: float, scope: PauseScope
    ) -> PauseScope:
        """The endpoint's pause for the fleet: what the store paused (the whole connection when
        the connection holds as many endpoints' pauses as it may), or ``scope`` (this worker's
        own decision) when the store is away or the namespace's share has no room for it."""
        if self.store is None or not self.store.up:
            return scope
        keys = store_keys(connection, "")
        namespace = namespace_of(connection.key)
        try:
            paused = await self.store.run(
                _PAUSE_ENDPOINT,
                [keys[0], keys[4], *self.shares.keys(namespace)],
                [
                    int(seconds * 1000),
                    digest_field(endpoint),
                    MAX_PAUSED_ENDPOINTS,
                    *self.shares.limits,
                ],
            )
        except StoreFull:
            self.shares.refused(namespace, "counters", "full")
            return scope
        except StoreUnavailable:
            return scope
        if not int(paused):  # this worker keeps it alone: the others hear the vendor too
            self.shares.refused(namespace, "counters", "share")
            return scope
        return "credential" if int(paused) == 2 else scope

    def forget(self, connection_uids: set[str]) -> None:
        self.alone.forget(connection_uids)
        self._leases = {
            key: lease for key, lease in self._leases.items() if key[0] in connection_uids
        }
        self._taking = {
            key: turn
            for key, turn in self._taking.items()
            if key[0] in connection_uids or turn.locked()
        }
        self._fleet_paused = {
            uid: paused for uid, paused in self._fleet_paused.items() if uid in connection_uids
        }


def _read(answer: list[bytes | int]) -> _Counted:
    numbers, paused = answer[:9], answer[9:]
    fields = (value.decode() if isinstance(value, bytes) else str(value) for value in paused[::2])
    return [int(value) for value in numbers], dict(zip(fields, map(int, paused[1::2]), strict=True))


def _standing(answer: tuple[int, ...], endpoint: str) -> Standing:
    """A worker's own count's answer (its share, the store away)."""
    admitted, limit, remaining, reset, which = answer[:5]
    if not admitted:
        raise _refusal(limit, reset, _DECIDED_BY.get(which, "app"), endpoint)
    return Standing(limit, remaining, reset) if limit else NO_LIMIT


def _refusal(limit: int, reset: int, decided_by: str, endpoint: str = "") -> ProxyError:
    """``decided_by``: a quota (app, connection, day) or a vendor's pause of the connection
    (pause) or of ``endpoint`` (endpoint)."""
    if decided_by in ("pause", "endpoint"):
        seconds = max(1, math.ceil(reset / 1000))
        what = (
            f"{endpoint} on this connection is paused for {seconds}s (its other paths are not)"
            if decided_by == "endpoint"
            else f"this connection is paused for {seconds}s (the credential's limit)"
        )
        return ProxyError(
            "rate_limited",
            f"the API asked to wait: {what}",
            headers={"Retry-After": str(seconds)},
        )
    what = {
        "app": f"more than {limit} requests per minute for this app on this connection",
        "connection": f"more than {limit} requests per minute on this connection (all apps)",
        "day": f"more than {limit} requests today (UTC) on this connection",
    }[decided_by]
    return ProxyError(
        "rate_limited",
        what,
        headers={
            "Retry-After": str(reset),
            "RateLimit-Limit": str(limit),
            "RateLimit-Remaining": "0",
            "RateLimit-Reset": str(reset),
        },
    )


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
