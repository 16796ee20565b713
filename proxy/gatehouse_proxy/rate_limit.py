"""Requests per minute per (connection, app), as a token bucket in each proxy replica.

The bucket holds ``BURST_SECONDS`` of the rate, not a whole minute: an app allowed 600 a minute
may send 100 at once, then 10 a second, so that it cannot hit the upstream (and the replica) with
its whole minute in one instant.

Buckets are per replica: with N replicas an app may make up to N times the limit. That keeps the
hot path free of any shared store; the limit protects upstreams from runaway apps, not billing.
"""

from __future__ import annotations

import math
import time

from gatehouse_proxy.errors import ProxyError

BURST_SECONDS = 10


class _Bucket:
    __slots__ = ("stamp", "tokens")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp


class RateLimiter:
    def __init__(self) -> None:
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def acquire(self, connection: str, app: str, per_minute: int) -> None:
        now = time.monotonic()
        rate = per_minute / 60.0
        burst = float(max(1, math.ceil(rate * BURST_SECONDS)))
        bucket = self._buckets.get((connection, app))
        if bucket is None:
            bucket = self._buckets[(connection, app)] = _Bucket(burst, now)
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.stamp) * rate)
        bucket.stamp = now
        if bucket.tokens < 1.0:
            retry_after = math.ceil((1.0 - bucket.tokens) / rate)
            raise ProxyError(
                "rate_limited",
                f"more than {per_minute} requests per minute for this connection",
                headers={"Retry-After": str(retry_after)},
            )
        bucket.tokens -= 1.0

    def forget(self, keep: set[tuple[str, str]]) -> None:
        for key in [key for key in self._buckets if key not in keep]:
            del self._buckets[key]
