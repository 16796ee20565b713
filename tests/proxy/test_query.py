"""The query string upstream: one reading for every parser, and no second copy of the key."""

from __future__ import annotations

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.query import upstream_query

KEY = ("api_key", "s3cret")


@pytest.mark.parametrize(
    "shadow",
    [
        "api_key=app",
        "API_KEY=app",
        "api_key[]=app",
        "api_key[0]=app",
        "api_key%5B%5D=app",
        "api_key%00x=app",
        "api%5Fkey=app",
        "api.key=app",
        "api+key=app",
        "api-key=app",
        "%20api_key=app",
        "api_key",
    ],
)
def test_every_spelling_of_the_injected_name_is_removed(shadow: str) -> None:
    assert upstream_query(f"a=1&{shadow}&b=2".encode(), KEY) == "?a=1&b=2&api_key=s3cret"


def test_lookalike_names_stay() -> None:
    sent = upstream_query(b"api_keys=1&my_api_key=2", KEY)
    assert sent == "?api_keys=1&my_api_key=2&api_key=s3cret"


@pytest.mark.parametrize("query", [b"a=1#api_key=x", b"a=1%23&b#"])
def test_a_raw_hash_is_refused(query: bytes) -> None:
    with pytest.raises(ProxyError) as refused:
        upstream_query(query, None)
    assert refused.value.code == "invalid_query"


def test_a_raw_semicolon_is_refused_where_a_key_is_injected() -> None:
    with pytest.raises(ProxyError, match="';'"):
        upstream_query(b"a=1;api_key=app", KEY)
    assert upstream_query(b"fields=a;b", None) == "?fields=a;b"
    assert upstream_query(b"fields=a%3Bb", KEY) == "?fields=a%3Bb&api_key=s3cret"


def test_pairs_are_written_out_from_their_decoded_bytes() -> None:
    assert upstream_query(b"q=caf\xc3\xa9&bad=%zz&x=%7e&plus=a+b&flag", None) == (
        "?q=caf%C3%A9&bad=%25zz&x=~&plus=a+b&flag"
    )
