"""Usage at a glance: requests, errors, latency and the requests the connection's cache answered
per (connection, app), for the last hour by minute and the last day by hour, from the counts the
proxy replicas report.

Replicas count per (connection, app) and minute and forget what they reported (see
``gatehouse_proxy.observation.usage_counts``); the leader adds each reported row here once. A pair
holds one fixed block of unsigned 32-bit counters (60 minutes and 24 hours, each: errors,
requests per latency bin, ``gatehouse_contract.activity.DURATION_BOUNDS_MS``, and those answered
from the cache), about 3.7 KB whatever
its traffic; at most ``most_pairs`` (20,000) pairs are kept, the one reported least recently going
first. The history lives in the leader's memory: a new leader starts empty.

p95 is read off a bucket's histogram: the bound of the bin the 95th percentile falls in, so it
is exact to a bin (above the last bound, 5 s, it says "over 5 s").
"""

from __future__ import annotations

import math
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from gatehouse_contract.activity import DURATION_BINS, DURATION_BOUNDS_MS, UsageRow

MOST_PAIRS = 20_000
MINUTES = 60
HOURS = 24
# A bucket's counters: errors, requests per latency bin, then those answered from the cache.
_WIDTH = 2 + DURATION_BINS
_HOURS_AT = MINUTES * _WIDTH
_MOST = 2**32 - 1

Window = Literal["hour", "day"]


@dataclass(frozen=True)
class Bucket:
    """One minute's or hour's requests of an app on a connection."""

    start: float  # seconds since the epoch
    requests: int
    errors: int
    durations: tuple[int, ...]  # requests per latency bin
    cached: int  # of the requests, those answered from the cache: calls the vendor did not get

    @property
    def p95_ms(self) -> float | None:
        """The bound of the bin the 95th percentile falls in; the last bound when it falls past
        it (``p95_over``); None without requests."""
        found = percentile_bin(self.durations, 0.95)
        if found is None:
            return None
        return float(DURATION_BOUNDS_MS[min(found, len(DURATION_BOUNDS_MS) - 1)])

    @property
    def p95_over(self) -> bool:
        """Whether the 95th percentile is past the last bound (5 s)."""
        return percentile_bin(self.durations, 0.95) == len(DURATION_BOUNDS_MS)


def percentile_bin(durations: tuple[int, ...], share: float) -> int | None:
    """The latency bin the ``share`` percentile of these requests falls in (None: no
    requests)."""
    total = sum(durations)
    if not total:
        return None
    wanted = math.ceil(total * share)
    seen = 0
    for index, count in enumerate(durations):
        seen += count
        if seen >= wanted:
            return index
    return len(durations) - 1


class _Pair:
    """One (connection, app): its 60 minutes and 24 hours, each slot at its period modulo the
    ring's length, and the newest period each ring holds."""

    __slots__ = ("counts", "last_hour", "last_minute")

    def __init__(self, minute: int) -> None:
        self.counts = array("I", bytes(4 * (MINUTES + HOURS) * _WIDTH))
        self.last_minute = minute
        self.last_hour = minute // 60

    def add(self, row: UsageRow) -> None:
        values = (row.errors, *row.durations, row.cached)
        self.last_minute = _put(self.counts, 0, MINUTES, self.last_minute, row.minute, values)
        hour = row.minute // 60
        self.last_hour = _put(self.counts, _HOURS_AT, HOURS, self.last_hour, hour, values)

    def buckets(self, window: Window, now_minute: int) -> list[tuple[int, ...]]:
        """The window's counters, oldest period first, ending with the period of now."""
        if window == "hour":
            offset, slots, last, now = 0, MINUTES, self.last_minute, now_minute
        else:
            offset, slots, last, now = _HOURS_AT, HOURS, self.last_hour, now_minute // 60
        found = []
        for period in range(now - slots + 1, now + 1):
            if period > last or period <= last - slots:
                found.append((0,) * _WIDTH)
            else:
                start = offset + (period % slots) * _WIDTH
                found.append(tuple(self.counts[start : start + _WIDTH]))
        return found


def _put(
    counts: array[int], offset: int, slots: int, last: int, period: int, values: tuple[int, ...]
) -> int:
    """Adds ``values`` to ``period``'s slot of the ring at ``offset``, whose newest period is
    ``last``; returns the ring's newest period. Slots of the periods skipped are cleared; a
    period already out of the ring is dropped."""
    if period > last:
        for skipped in range(max(last + 1, period - slots + 1), period + 1):
            start = offset + (skipped % slots) * _WIDTH
            counts[start : start + _WIDTH] = array("I", bytes(4 * _WIDTH))
        last = period
    elif period <= last - slots:
        return last
    start = offset + (period % slots) * _WIDTH
    for index, value in enumerate(values):
        counts[start + index] = min(counts[start + index] + value, _MOST)
    return last


class UsageHistory:
    def __init__(self, most_pairs: int = MOST_PAIRS, clock: Callable[[], float] = time.time):
        self.most_pairs = most_pairs
        self.clock = clock
        # (connection, app) -> its counts, the one reported least recently first.
        self._pairs: OrderedDict[tuple[str, str], _Pair] = OrderedDict()
        self._apps: dict[str, set[str]] = {}  # connection -> the apps with counts on it

    def __len__(self) -> int:
        return len(self._pairs)

    def add(self, rows: Iterable[UsageRow]) -> None:
        oldest = int(self.clock() // 60) - HOURS * 60
        for row in rows:
            if row.minute <= oldest:
                continue  # past the day
            key = (row.connection, row.app)
            pair = self._pairs.get(key)
            if pair is None:
                pair = self._pairs[key] = _Pair(row.minute)
                self._apps.setdefault(row.connection, set()).add(row.app)
                if len(self._pairs) > self.most_pairs:
                    self._forget(next(iter(self._pairs)))
            else:
                self._pairs.move_to_end(key)
            pair.add(row)

    def _forget(self, key: tuple[str, str]) -> None:
        del self._pairs[key]
        connection, app = key
        apps = self._apps[connection]
        apps.discard(app)
        if not apps:
            del self._apps[connection]

    def of_connection(self, connection: str, window: Window) -> dict[str, list[Bucket]]:
        """Per app (its routing key), the window's buckets, oldest first."""
        now = int(self.clock() // 60)
        length = 60 if window == "hour" else 3600
        first = (now - MINUTES + 1) * 60 if window == "hour" else (now // 60 - HOURS + 1) * 3600
        series = {}
        for app in sorted(self._apps.get(connection, ())):
            counts = self._pairs[(connection, app)].buckets(window, now)
            series[app] = [
                Bucket(
                    first + index * length,
                    sum(values[1:-1]),
                    values[0],
                    values[1:-1],
                    values[-1],
                )
                for index, values in enumerate(counts)
            ]
        return series
