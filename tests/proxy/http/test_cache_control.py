"""Cache-Control and Vary read by their grammar and within bounds: whatever a vendor writes there
decides only whether and how long its answer is kept."""

from __future__ import annotations

import pytest

from gatehouse_proxy.http.cache_control import (
    MAX_FIELD_CHARS,
    MAX_ITEMS,
    MAX_SECONDS,
    UNREADABLE,
    CacheControl,
    cache_control,
    vary,
)


def test_an_answer_without_the_field_says_nothing() -> None:
    assert cache_control([]) == CacheControl()


@pytest.mark.parametrize(
    ("lines", "read"),
    [
        (["no-store"], CacheControl(no_store=True)),
        (["Private, max-age=60"], CacheControl(private=True, max_age=60)),
        (['no-cache="Set-Cookie"'], CacheControl(no_cache=True)),
        (["max-age=60, s-maxage=5"], CacheControl(max_age=5)),
        (["s-maxage=500", "max-age=5"], CacheControl(max_age=500)),
        (["max-age=60", "max-age=10"], CacheControl(max_age=10)),  # the smallest: RFC 9111 4.2.1
        (['max-age="30"'], CacheControl(max_age=30)),
        (["max-age=+5"], CacheControl()),
        (["max-age=5.0"], CacheControl()),
        (["max-age=٣"], CacheControl()),
        (["max-age=99999999999999999999999"], CacheControl(max_age=MAX_SECONDS)),
        (["max-age=" + "9" * 5000], CacheControl(no_store=True)),  # past the field's bound
        (
            ["must-revalidate, stale-if-error=30"],
            CacheControl(must_revalidate=True),
        ),
        (["stale-while-revalidate=10"], CacheControl()),
        (['ext="a, no-store", max-age=9'], CacheControl(max_age=9)),  # a comma inside quotes
        (["{}garbage, max-age=7"], CacheControl(max_age=7)),
    ],
)
def test_directives(lines: list[str], read: CacheControl) -> None:
    assert cache_control(lines) == read


def test_too_many_directives_read_as_no_store() -> None:
    assert cache_control([", ".join(["a"] * (MAX_ITEMS + 1))]) == UNREADABLE
    assert cache_control(["x" * (MAX_FIELD_CHARS + 1)]) == UNREADABLE


def test_vary() -> None:
    assert vary([]) == ()
    assert vary(["Accept-Language, accept", "ACCEPT"]) == ("accept", "accept-language")
    assert vary(["accept, *"]) == ("*",)
    assert vary(["a b"]) is None
    assert vary([", ".join(f"h{n}" for n in range(MAX_ITEMS + 1))]) is None
    assert vary(["h" * (MAX_FIELD_CHARS + 1)]) is None
