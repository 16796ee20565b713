"""The query string upstream: one reading for every parser, and no second copy of the key."""

from __future__ import annotations

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.query import upstream_query

KEY = ("api_key", "s3cret")


# Each rule by which a parser reads a name as the key's, with its spellings and encodings.
SHADOWS = {
    "as sent": ["api_key=app", "api_key", "api%5Fkey=app", "api_key="],
    "any case": ["API_KEY=app", "Api_Key=app", "api%5fKEY=app"],
    "leading and trailing whitespace": [
        "%20api_key=a",
        "+api_key=a",
        "+%20api_key=a",
        "api_key+=a",
    ],
    "space as _": ["api+key=app", "api%20key=app"],
    ". as _": ["api.key=app", "api%2Ekey=app", "api%2ekey=app"],
    "- as _": ["api-key=app", "api%2Dkey=app"],
    "0x80-0x9F as _ (older PHP)": ["api%80key=app", "api%85key=app", "api%9Fkey=app"],
    "NUL ends the name": ["api_key%00x=app", "api_key%00=app", "api%5Fkey%00%5B=app"],
    "name[...] is an array named name": [
        "api_key[]=app",
        "api_key[0]=app",
        "api_key[x][y]=app",
        "api_key[x]tail=app",
        "api_key[=app",
        "api_key[+]=app",
        "api_key%5B%5D=app",
        "api_key%5b0%5d=app",
        "api+key[]=app",
        "api.key%5Bx%5D=app",
    ],
    "an unclosed [ as _, the rest kept (PHP)": [
        "api[key=app",
        "api%5Bkey=app",
        "api%5bkey=app",
        "+api[key=app",
        "API[KEY=app",
    ],
    "leading brackets skipped, next bracket ends (Rack 2)": [
        "[api_key]=app",
        "]api_key=app",
        "[[api_key]]=app",
        "%5Bapi_key%5D=app",
        "api_key]x=app",
    ],
}


@pytest.mark.parametrize(
    "shadow",
    [
        pytest.param(spelling, id=f"{rule}: {spelling}")
        for rule, spellings in SHADOWS.items()
        for spelling in spellings
    ],
)
def test_every_spelling_of_the_injected_name_is_removed(shadow: str) -> None:
    assert upstream_query(f"a=1&{shadow}&b=2".encode(), KEY) == "?a=1&b=2&api_key=s3cret"


@pytest.mark.parametrize(
    "name",
    [
        "api_keys",
        "my_api_key",
        "apikey",
        "api_key2",
        "api_key_",
        "api%2Bkey",  # a literal plus: PHP reads "api+key"
        "api%A0key",  # above 0x9F, kept by every PHP
        "api%C2%80key",  # U+0080 in UTF-8: its lead byte stays
        "x[api_key]",  # an index, not the name
        "api_key%5Fx",
        "api[key]",  # the array "api"
    ],
)
def test_distinct_names_stay(name: str) -> None:
    assert upstream_query(f"{name}=1".encode(), KEY).endswith("=1&api_key=s3cret")


def test_the_keys_own_name_is_read_as_it_is_sent() -> None:
    # Sent as "api%2Bkey", a name with a plus is not a name with a space.
    assert upstream_query(b"api+key=a&api%2Bkey=b", ("api+key", "s")) == "?api+key=a&api%2Bkey=s"
    assert upstream_query(b"api_key=a&api%2Ekey=b", ("api.key", "s")) == "?api.key=s"


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
