"""The query string upstream: one reading for every parser, and no second copy of the key."""

from __future__ import annotations

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rules.query import upstream_query

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
        "api%2Bkey",  # a literal plus, sent as an escape: PHP reads "api+key"
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
    # Sent as "api%2Bkey", a name with a plus: "api%2Bkey" is that name to every parser, and so is
    # a raw "api+key" to a parser that leaves "+" alone (JavaScript's decodeURIComponent, RFC 3986
    # parsers); a space to form parsers, which read "api key" and not the key's name.
    assert upstream_query(b"api+key=a&api%2Bkey=b&api%20key=c", ("api+key", "s")) == (
        "?api%20key=c&api%2Bkey=s"
    )
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


# What the app encoded correctly goes upstream exactly as written: an escape stays an escape (in
# its own case, also of a character that needed none), a raw character allowed raw stays raw.
KEPT_AS_WRITTEN = [
    "phone=%2B15551234567",  # "+1555..." to every parser; a raw "+" would be " 1555..."
    "tz=%2B01:00",
    "sig=ab%2Bcd%2Fef%3D%3D",
    "sig=ab+cd",  # a space to form parsers, a plus to others: as the app meant it
    "sig=abc==",
    "x=%7e&y=%7E",
    "q=caf%C3%A9",
    "q=a%26b%3Dc",
    "path=/a/b?c:d@e!$'()*,",
    "api%2Bkey=1",
    "name=%u00e9",  # JavaScript's escape(), read by ASP and IIS
]


@pytest.mark.parametrize("pair", KEPT_AS_WRITTEN)
def test_what_the_app_encoded_correctly_is_kept_as_written(pair: str) -> None:
    assert upstream_query(pair.encode(), KEY) == f"?{pair}&api_key=s3cret"
    assert upstream_query(pair.encode(), None) == f"?{pair}"


def test_only_what_cannot_go_raw_is_encoded() -> None:
    assert upstream_query(
        b'q=caf\xc3\xa9&bad=%zz&end=%&short=%2&u=%u12&plus=a+b&flag&sp=a b&br=a[]{}|\\^`"<>', None
    ) == (
        "?q=caf%C3%A9&bad=%25zz&end=%25&short=%252&u=%25u12&plus=a+b&flag&sp=a%20b"
        "&br=a%5B%5D%7B%7D%7C%5C%5E%60%22%3C%3E"
    )
    assert upstream_query(b"a=%00&b=\x01\x7f", None) == "?a=%00&b=%01%7F"


# Go's strings.EqualFold and Java's equalsIgnoreCase fold these onto ASCII letters; NFKC folds
# fullwidth letters and the long s; full case folding (Ruby's casecmp?, Python's casefold) "ß".
UNICODE_SHADOWS = [
    ("api_key", "api_%E2%84%AAey"),  # KELVIN SIGN: k
    ("api_key", "ap%C4%B1_key"),  # LATIN SMALL LETTER DOTLESS I: i
    ("api_key", "ap%C4%B0_KEY"),  # LATIN CAPITAL LETTER I WITH DOT ABOVE: i
    ("sig", "%C5%BFig"),  # LATIN SMALL LETTER LONG S: s
    ("sig", "%C5%BF%C4%B1g"),
    ("api_key", "%EF%BD%81%EF%BD%90%EF%BD%89_key"),  # fullwidth "api"
    ("api_key", "api%EF%BC%BFkey"),  # FULLWIDTH LOW LINE
    ("api_key", "api%EF%BC%8Ekey"),  # FULLWIDTH FULL STOP, then "." as "_"
    ("api_key", "api_key%EF%BC%BB0%EF%BC%BD"),  # fullwidth brackets: an array
    ("api_key", "%E3%80%80api_key"),  # IDEOGRAPHIC SPACE, trimmed once folded
    ("pass", "pa%C3%9F"),  # "ß" folds to "ss"
    ("api_key", "api%u005fkey"),  # ASP decodes %u escapes in the query
    ("api_key", "%u0061pi_%u212Aey"),
]


@pytest.mark.parametrize(("key", "shadow"), UNICODE_SHADOWS)
def test_names_that_unicode_folding_reads_as_the_key_are_removed(key: str, shadow: str) -> None:
    assert upstream_query(f"a=1&{shadow}=app".encode(), (key, "s")) == f"?a=1&{key}=s"


@pytest.mark.parametrize(
    "name", ["api_k%C3%A9y", "api_%E2%84%ABey", "%CE%B1pi_key", "api%u005Fkeys", "api_key%C3%9F"]
)
def test_other_unicode_names_stay(name: str) -> None:
    assert upstream_query(f"{name}=1".encode(), KEY) == f"?{name}=1&api_key=s3cret"
