"""Which requests the cache answers, and which answers it keeps for how long."""

from __future__ import annotations

import pytest

from gatehouse_contract.routes import CachePolicy
from gatehouse_proxy.caching.storability import Lifetime, bypassed, lifetime

POLICY = CachePolicy(
    ttl_seconds=60,
    max_ttl_seconds=600,
    max_body_bytes=1000,
    stale_while_revalidate_seconds=5,
    stale_if_error_seconds=30,
)


@pytest.mark.parametrize(
    ("method", "headers", "reason"),
    [
        ("GET", [("Accept", "application/json")], ""),
        ("HEAD", [], "method"),
        ("POST", [], "method"),
        ("GET", [("Range", "bytes=0-10")], "conditional"),
        ("GET", [("if-none-match", '"v1"')], "conditional"),
        # An app's own Cache-Control does not bypass the cache (nginx's and Varnish's default).
        ("GET", [("Cache-Control", "no-cache")], ""),
    ],
)
def test_what_the_cache_answers(method: str, headers: list[tuple[str, str]], reason: str) -> None:
    assert bypassed(method, headers) == reason


@pytest.mark.parametrize(
    ("status", "headers", "kept"),
    [
        (200, [], Lifetime(60, 5, 30, ())),
        (200, [("Cache-Control", "max-age=10")], Lifetime(10, 5, 30, ())),
        # A huge max-age is the connection's maxTTLSeconds at most.
        (200, [("Cache-Control", "max-age=999999999999")], Lifetime(600, 5, 30, ())),
        (200, [("Cache-Control", "s-maxage=20, max-age=1")], Lifetime(20, 5, 30, ())),
        (200, [("Cache-Control", "max-age=10, must-revalidate")], Lifetime(10, 0, 0, ())),
        (200, [("Vary", "Accept-Language")], Lifetime(60, 5, 30, ("accept-language",))),
        (404, [], Lifetime(60, 5, 30, ())),
        (200, [("Cache-Control", "no-store")], "no-store"),
        (200, [("Cache-Control", "private")], "private"),
        (200, [("Set-Cookie", "session=1")], "set-cookie"),
        (200, [("Vary", "*")], "vary"),
        (200, [("Cache-Control", "no-cache")], "no-cache"),
        (200, [("Cache-Control", "max-age=0")], "max-age"),
        (500, [], "status"),
        (206, [], "status"),
        (302, [], "status"),
    ],
)
def test_what_is_kept_and_for_how_long(
    status: int, headers: list[tuple[str, str]], kept: Lifetime | str
) -> None:
    assert lifetime(POLICY, status, headers, revalidatable=False) == kept


def test_an_answer_to_revalidate_each_time_is_kept_only_with_a_validator() -> None:
    found = lifetime(POLICY, 200, [("Cache-Control", "no-cache")], revalidatable=True)
    assert found == Lifetime(0, 5, 30, ())
    assert isinstance(found, Lifetime)
    assert found.kept_seconds(revalidatable=True) == 30


def test_the_store_keeps_an_answer_while_it_may_be_served_or_renewed() -> None:
    kept = Lifetime(60, 5, 30, ())
    assert kept.kept_seconds(revalidatable=False) == 90
    assert kept.kept_seconds(revalidatable=True) == 120
