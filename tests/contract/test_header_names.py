"""Header names as servers read them: one rule for the proxy's drops and the operator's API keys."""

from __future__ import annotations

import random
import re

import pytest

from gatehouse_contract.header_names import (
    API_KEY_HEADER_RESERVED_RE2,
    CONNECTION_HEADER_RESERVED_RE2,
    DROPPED_FROM_APPS,
    DROPPED_PREFIXES,
    HOP_BY_HOP,
    ROUTING_TOKENS,
    canonical_name,
    reserved_for_api_key,
    reserved_for_connection_header,
)


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("X-Api-Key", "x-api-key"),
        ("X_Api_Key", "x-api-key"),
        ("X.Api.Key", "x-api-key"),
        ("x~api!KEY", "x-api-key"),
        ("X#$%&'*+^`|Key", "x----------key"),
        ("Content-MD5", "content-md5"),
        ("Proxy", "proxy"),
    ],
)
def test_every_character_but_letters_and_digits_reads_as_a_hyphen(
    name: str, canonical: str
) -> None:
    assert canonical_name(name) == canonical


# Names an API key may not be sent as, in the spellings CGI-style servers merge (N6: before,
# Content_Length, Transfer_Encoding and X-Forwarded-Host were admitted and sent).
RESERVED = [
    "Content_Length",
    "content.length",
    "Transfer_Encoding",
    "Transfer~Encoding",
    "Connection",
    "TE",
    "Keep_Alive",
    "Upgrade",
    "Expect",
    "Content-Type",
    "Content_Type",
    "Host",
    "Cookie",
    "Proxy",
    "Proxy-Authorization",
    "Proxy_Anything",
    "X-Forwarded-Host",
    "X_Forwarded_Host",
    "X.Forwarded.Host",
    "X-Original-URL",
    "X-Real-IP",
    "X-HTTP-Method-Override",
    "Script_Name",
    "X-Gatehouse-Caller",
    "X_Envoy_Foo",
    "Via",
    "Origin",
]
ALLOWED = [
    "Authorization",  # some APIs want the key there without "Bearer"
    "X-Api-Key",
    "X_Api_Key",
    "Api-Key",
    "apikey",
    "X-Goog-Api-Key",
    "Ocp-Apim-Subscription-Key",
    "X-Auth-Token",
    "X-Hostinger-Key",  # "hostinger" is no routing token
    "X-Ipsum",
    "Content-MD5-Key",
]


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_names_are_refused_in_every_spelling(name: str) -> None:
    assert reserved_for_api_key(name)


@pytest.mark.parametrize("name", ALLOWED)
def test_ordinary_key_names_are_allowed(name: str) -> None:
    assert not reserved_for_api_key(name)


def _corpus() -> list[str]:
    words = sorted(DROPPED_FROM_APPS | HOP_BY_HOP | ROUTING_TOKENS) + [
        prefix + "key" for prefix in DROPPED_PREFIXES
    ]
    names = [*RESERVED, *ALLOWED]
    for word in words:
        for mark in "-_.~!":
            spelled = word.replace("-", mark)
            names += [spelled, spelled.upper(), f"x{mark}{spelled}", f"{spelled}{mark}id"]
            names += [f"x{spelled}", f"{spelled}s"]
    alphabet = "abcdefghiklmnoprstuvxyz-_.hostipurl"
    chosen = random.Random(36)  # noqa: S311 (names to test, not secrets)
    names += ["".join(chosen.choices(alphabet, k=chosen.randint(1, 16))) for _ in range(3000)]
    return names


def test_the_crds_expression_says_what_the_rule_says() -> None:
    """The CEL rule is CEL's matches() (RE2, a match anywhere) over the same tables."""
    expression = re.compile(API_KEY_HEADER_RESERVED_RE2)
    disagree = [
        name for name in _corpus() if bool(expression.search(name)) != reserved_for_api_key(name)
    ]
    assert disagree == []


def test_the_crds_expression_for_a_connections_headers_says_what_the_rule_says() -> None:
    expression = re.compile(CONNECTION_HEADER_RESERVED_RE2)
    disagree = [
        name
        for name in _corpus()
        if bool(expression.search(name)) != reserved_for_connection_header(name)
    ]
    assert disagree == []


@pytest.mark.parametrize("name", ["Authorization", "X-Forwarded-Host", "Cookie", "Proxy", "TE"])
def test_a_connection_may_not_send_what_apps_may_not(name: str) -> None:
    assert reserved_for_connection_header(name)


@pytest.mark.parametrize("name", ["Notion-Version", "Content-Type", "Accept", "anthropic-version"])
def test_a_connection_may_send_what_vendors_ask_for(name: str) -> None:
    assert not reserved_for_connection_header(name)
