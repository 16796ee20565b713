"""The bucket allows ten seconds' worth at once, then refuses with a Retry-After."""

from __future__ import annotations

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rate_limit import RateLimiter


def test_limit_is_per_connection_and_app() -> None:
    limiter = RateLimiter()
    for _ in range(10):
        limiter.acquire("ns/conn", "ns/DataApp/a", per_minute=60)
    with pytest.raises(ProxyError) as caught:
        limiter.acquire("ns/conn", "ns/DataApp/a", per_minute=60)
    assert caught.value.status == 429
    assert int(caught.value.headers["Retry-After"]) == 1
    limiter.acquire("ns/conn", "ns/DataApp/b", per_minute=60)
    limiter.acquire("ns/other", "ns/DataApp/a", per_minute=60)


@pytest.mark.parametrize(("per_minute", "burst"), [(1, 1), (3, 1), (600, 100), (6000, 1000)])
def test_a_burst_is_ten_seconds_of_the_rate(per_minute: int, burst: int) -> None:
    limiter = RateLimiter()
    for _ in range(burst):
        limiter.acquire("ns/conn", "ns/DataApp/a", per_minute=per_minute)
    with pytest.raises(ProxyError):
        limiter.acquire("ns/conn", "ns/DataApp/a", per_minute=per_minute)
