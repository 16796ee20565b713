"""The bucket allows a minute's worth at once, then refuses with a Retry-After."""

from __future__ import annotations

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rate_limit import RateLimiter


def test_limit_is_per_connection_and_app() -> None:
    limiter = RateLimiter()
    for _ in range(3):
        limiter.acquire("ns/conn", "ns/DataApp/a", per_minute=3)
    with pytest.raises(ProxyError) as caught:
        limiter.acquire("ns/conn", "ns/DataApp/a", per_minute=3)
    assert caught.value.status == 429
    assert 1 <= int(caught.value.headers["Retry-After"]) <= 20
    limiter.acquire("ns/conn", "ns/DataApp/b", per_minute=3)
    limiter.acquire("ns/other", "ns/DataApp/a", per_minute=3)
