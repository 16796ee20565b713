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
        (200, [], Lifetime(60, 5, 30, (), 60)),
        (200, [("Cache-Control", "max-age=10")], Lifetime(10, 5, 30, (), 10)),
        # A huge max-age is the connection's maxTTLSeconds at most.
        (200, [("Cache-Control", "max-age=999999999999")], Lifetime(600, 5, 30, (), 600)),
        (200, [("Cache-Control", "s-maxage=20, max-age=1")], Lifetime(20, 5, 30, (), 20)),
        (200, [("Cache-Control", "max-age=10, must-revalidate")], Lifetime(10, 0, 0, (), 10)),
        (200, [("Vary", "Accept-Language")], Lifetime(60, 5, 30, ("accept-language",), 60)),
        (404, [], Lifetime(60, 5, 30, (), 60)),
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
    # Never served stale, and kept the connection's ttlSeconds to be revalidated.
    assert found == Lifetime(0, 0, 0, (), 60)
    assert isinstance(found, Lifetime)
    assert found.kept_seconds(revalidatable=True) == 60


def test_the_store_keeps_an_answer_while_it_may_be_served_or_renewed() -> None:
    kept = Lifetime(60, 5, 30, (), 60)
    assert kept.kept_seconds(revalidatable=False) == 90
    assert kept.kept_seconds(revalidatable=True) == 120


@pytest.mark.parametrize(
    ("headers", "fresh"),
    [
        ([("Cache-Control", "max-age=100"), ("Age", "40")], 60),
        ([("Cache-Control", "max-age=100"), ("Age", "400")], 0),
        ([("Cache-Control", "max-age=100"), ("Age", "not a number")], 100),
        ([("Expires", "0")], 0),
        ([("Expires", "Thu, 01 Jan 1970 00:00:00 GMT")], 0),
        ([("Expires", "Fri, 01 Jan 9999 00:00:00 GMT")], 600),
        # max-age wins over Expires (RFC 9111 5.3).
        ([("Expires", "0"), ("Cache-Control", "max-age=30")], 30),
    ],
)
def test_the_vendors_age_and_expires_count(headers: list[tuple[str, str]], fresh: int) -> None:
    found = lifetime(POLICY, 200, [*headers, ("ETag", '"v"')], revalidatable=True)
    assert isinstance(found, Lifetime)
    assert found.fresh == fresh
