"""Path normalisation and prefix matching survive the known traversal and smuggling tricks."""

from __future__ import annotations

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.matcher import allowed_by_prefixes, check_method, normalise


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [
        (b"/v1/users", "/v1/users"),
        (b"/v1/users/", "/v1/users/"),
        (b"/", "/"),
        (b"", "/"),
        (b"/v1/users%20list", "/v1/users%20list"),
        (b"/v1/caf%C3%A9", "/v1/caf%C3%A9"),
        (b"/v1/a%3Bb;v=1", "/v1/a;b;v=1"),
        (b"/v1/@evil.example", "/v1/@evil.example"),
        (b"/v1/%7Euser", "/v1/~user"),
    ],
)
def test_normalises_to_a_canonical_encoding(raw: bytes, encoded: str) -> None:
    assert normalise(raw).encoded == encoded


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"/v1/../admin", "path_traversal"),
        (b"/v1/./users", "path_traversal"),
        (b"/v1/%2e%2e/admin", "path_traversal"),
        (b"/v1/%2E%2e/admin", "path_traversal"),
        (b"/v1/..;/admin", "path_traversal"),
        (b"/v1/%252e%252e/admin", "invalid_path"),
        (b"/v1/%2F../admin", "invalid_path"),
        (b"/v1%2fadmin", "invalid_path"),
        (b"/v1/%5c../admin", "invalid_path"),
        (b"/v1\\..\\admin", "invalid_path"),
        (b"//evil.example/v1", "invalid_path"),
        (b"/http://evil.example/", "invalid_path"),
        (b"/v1//users", "invalid_path"),
        (b"/v1/%c0%ae%c0%ae/admin", "invalid_path"),
        (b"/v1/users%00", "invalid_path"),
        (b"/v1/users%0d%0aHost:%20evil", "invalid_path"),
        (b"/v1/us ers", "invalid_path"),
        (b"/v1/users#frag", "invalid_path"),
        (b"/v1/users%zz", "invalid_path"),
        (b"/v1/users%2", "invalid_path"),
    ],
)
def test_refuses_ambiguous_paths(raw: bytes, code: str) -> None:
    with pytest.raises(ProxyError) as caught:
        normalise(raw)
    assert caught.value.code == code
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("path", "prefixes", "allowed"),
    [
        (b"/v1/users", ("/v1/users",), True),
        (b"/v1/users/7", ("/v1/users",), True),
        (b"/v1/users/", ("/v1/users/",), True),
        (b"/v1/users-admin", ("/v1/users",), False),
        (b"/v1/user", ("/v1/users",), False),
        (b"/v2/users", ("/v1", "/v2/users"), True),
        (b"/anything", (), True),
        (b"/anything", ("/",), True),
        (b"/V1/users", ("/v1",), False),
        (b"/v1%2Fusers", ("/v1",), None),
    ],
)
def test_prefixes_match_whole_segments(
    path: bytes, prefixes: tuple[str, ...], allowed: bool | None
) -> None:
    if allowed is None:
        with pytest.raises(ProxyError):
            normalise(path)
        return
    assert allowed_by_prefixes(normalise(path), prefixes) is allowed


def test_method_outside_the_allowed_set_is_405_with_allow() -> None:
    with pytest.raises(ProxyError) as caught:
        check_method("DELETE", frozenset({"GET", "POST"}))
    assert caught.value.status == 405
    assert caught.value.headers["Allow"] == "GET, POST"
    check_method("POST", frozenset({"GET", "POST"}))
