"""Path normalisation and prefix matching survive the known traversal and smuggling tricks."""

from __future__ import annotations

import pytest

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rules.matcher import allowed_by_prefixes, check_method, endpoint_of, normalise


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


# Segments that some server reads as ., .. or empty, each with the rule that makes it so.
READ_AS_DOTS_OR_EMPTY = [
    # Trimmed ASCII whitespace, and Windows dropping trailing dots and spaces.
    (b"/v1/%20../admin", "invalid_path"),
    (b"/v1/..%20/admin", "invalid_path"),
    (b"/v1/%20.%20/admin", "invalid_path"),
    (b"/v1/.%20./admin", "invalid_path"),
    (b"/v1/.../admin", "invalid_path"),
    (b"/v1/%20/admin", "invalid_path"),
    (b"/v1/..%09/admin", "invalid_path"),
    # A name ends at Tomcat's ";", and at a "?" or "#" a decoding server reads as the path's end.
    (b"/v1/%20..;v=1/admin", "invalid_path"),
    (b"/v1/%20;v=1/admin", "invalid_path"),
    (b"/v1/..%3F/admin", "path_traversal"),
    (b"/v1/.%23x/admin", "path_traversal"),
    # Unicode whitespace: no-break, en quad to hair space, ideographic, next line, line separator.
    (b"/v1/%C2%A0../admin", "invalid_path"),
    (b"/v1/..%E2%80%80/admin", "invalid_path"),
    (b"/v1/..%E2%80%8A/admin", "invalid_path"),
    (b"/v1/%E3%80%80..%E3%80%80/admin", "invalid_path"),
    (b"/v1/..%C2%85/admin", "invalid_path"),
    (b"/v1/..%E2%80%A8/admin", "invalid_path"),
    (b"/v1/%C2%A0/admin", "invalid_path"),
    # Dropped invisibles, also inside the name: BOM, zero width space and joiner, word joiner,
    # Mongolian vowel separator, a tag character, a Hangul filler, a combining mark.
    (b"/v1/%EF%BB%BF../admin", "invalid_path"),
    (b"/v1/.%E2%80%8B./admin", "invalid_path"),
    (b"/v1/.%E2%80%8D./admin", "invalid_path"),
    (b"/v1/..%E2%81%A0/admin", "invalid_path"),
    (b"/v1/..%E1%A0%8E/admin", "invalid_path"),
    (b"/v1/..%F3%A0%80%A0/admin", "invalid_path"),
    (b"/v1/..%E3%85%A4/admin", "invalid_path"),
    (b"/v1/.%CC%81./admin", "invalid_path"),
    # NFKC and best-fit dots: fullwidth, one dot leader, small full stop, two dot leader,
    # presentation-form two dot leader, ellipsis; mixed with ASCII, spaces and look-alike ";".
    (b"/v1/%EF%BC%8E%EF%BC%8E/admin", "invalid_path"),
    (b"/v1/%EF%BC%8E/admin", "invalid_path"),
    (b"/v1/%E2%80%A4%E2%80%A4/admin", "invalid_path"),
    (b"/v1/%EF%B9%92./admin", "invalid_path"),
    (b"/v1/%E2%80%A5/admin", "invalid_path"),
    (b"/v1/%EF%B8%B0/admin", "invalid_path"),
    (b"/v1/%E2%80%A6/admin", "invalid_path"),
    (b"/v1/%EF%BC%8E%EF%BC%8E%C2%A0/admin", "invalid_path"),
    (b"/v1/%EF%BC%8E%EF%BC%8E%EF%BC%9Bv=1/admin", "invalid_path"),
    (b"/v1/..%CD%BEv=1/admin", "invalid_path"),
    (b"/v1/%EF%BC%8E%EF%BC%8E%C2%BF/admin", "invalid_path"),
    (b"/v1/..%EF%BC%9Fx/admin", "invalid_path"),
]
# Segments that a folding server splits in two: NFKC slashes and backslashes (fullwidth, small
# reverse solidus, "a/c") and best-fit ones (fraction and division slash, set minus, acute accent,
# yen and won signs); and percent-escapes made of look-alikes (fullwidth and Arabic percent signs).
READ_AS_SEPARATORS = [
    b"/v1/a%EF%BC%8F..%EF%BC%8Fadmin",
    b"/v1/..%EF%BC%BCadmin",
    b"/v1/..%EF%B9%A8admin",
    b"/v1/..%E2%84%80",
    b"/v1/..%E2%81%84admin",
    b"/v1/..%E2%88%95admin",
    b"/v1/..%E2%88%96admin",
    b"/v1/..%C2%B4admin",
    b"/v1/..%C2%A5admin",
    b"/v1/..%E2%82%A9admin",
    b"/v1/%EF%BC%852e%EF%BC%852e/admin",
    b"/v1/%D9%AA2e%D9%AA2e/admin",
]


@pytest.mark.parametrize(("raw", "code"), READ_AS_DOTS_OR_EMPTY)
def test_refuses_segments_some_server_reads_as_dots_or_empty(raw: bytes, code: str) -> None:
    with pytest.raises(ProxyError) as caught:
        normalise(raw)
    assert caught.value.code == code
    assert caught.value.status == 400


@pytest.mark.parametrize("raw", READ_AS_SEPARATORS)
def test_refuses_lookalikes_of_separators_and_escapes(raw: bytes) -> None:
    with pytest.raises(ProxyError) as caught:
        normalise(raw)
    assert caught.value.code == "invalid_path"
    assert "look-alike" in caught.value.message or "/ or \\" in caught.value.message


# IIS decodes %uXXXX escapes too: encoded once more (%25u...), they survive the first decoding as
# escapes of dots, slashes and backslashes, ASCII or fullwidth; so do look-alikes of "%" and "u"
# that NFKC or best fit fold into one.
IIS_U_ESCAPES = [
    b"/v1/%25u002e%25u002e/admin",
    b"/v1/%25u002E%25u002E/admin",
    b"/v1/%25U002e./admin",
    b"/v1/.%25u002e/admin",
    b"/v1/%25uFF0E%25uFF0E/admin",
    b"/v1/%25uff0e/admin",
    b"/v1/..%25u002fadmin",
    b"/v1/..%25u002Fadmin",
    b"/v1/..%25u005cadmin",
    b"/v1/..%25uFF0Fadmin",
    b"/v1/..%25u2215admin",
    b"/v1/%EF%BC%85u002e%EF%BC%85u002e/admin",
    b"/v1/%D9%AAu002f/admin",
    b"/v1/%EF%BC%85%EF%BD%95%EF%BC%90%EF%BC%90%EF%BC%92%EF%BD%85/admin",
]


@pytest.mark.parametrize("raw", IIS_U_ESCAPES)
def test_refuses_iis_u_escapes_left_after_one_decoding(raw: bytes) -> None:
    with pytest.raises(ProxyError) as caught:
        normalise(raw)
    assert caught.value.code == "invalid_path"
    assert "%u" in caught.value.message


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [
        (b"/v1/..a/.b/c.", "/v1/..a/.b/c."),
        (b"/v1/%20a/b%20", "/v1/%20a/b%20"),
        (b"/v1/v1.2;v=1", "/v1/v1.2;v=1"),
        (b"/v1/;v=1/a%3Fb", "/v1/;v=1/a%3Fb"),
        (b"/v1/%E6%97%A5%E6%9C%AC", "/v1/%E6%97%A5%E6%9C%AC"),
        (b"/v1/%C2%BFqu%C3%A9", "/v1/%C2%BFqu%C3%A9"),
        (b"/v1/100%EF%BC%85", "/v1/100%EF%BC%85"),
        (b"/v1/%EF%BC%8Ejpg", "/v1/%EF%BC%8Ejpg"),
        (b"/v1/%E3%80%80a", "/v1/%E3%80%80a"),
        (b"/v1/%C2%BD%EF%BF%A5", "/v1/%C2%BD%EF%BF%A5"),
        (b"/v1/%E2%80%A6and%20more", "/v1/%E2%80%A6and%20more"),
        # A "%u" that no decoder reads as an escape: four hex digits must follow.
        (b"/v1/%25uber", "/v1/%25uber"),
        (b"/v1/100%25u", "/v1/100%25u"),
        (b"/v1/%25u00e", "/v1/%25u00e"),
    ],
)
def test_names_with_dots_spaces_and_lookalikes_among_other_characters_pass(
    raw: bytes, encoded: str
) -> None:
    assert normalise(raw).encoded == encoded


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


@pytest.mark.parametrize(
    ("path", "prefixes", "endpoint"),
    [
        (b"/v1/users/7", (), "/v1/users"),
        (b"/v1/users/7", ("/v1",), "/v1/users"),  # at least two segments
        (b"/v1/users/7/orders", ("/v1/users/7",), "/v1/users/7"),  # the longest entry
        (b"/v1/search/repos/x", ("/v1", "/v1/search/repos"), "/v1/search/repos"),
        (b"/v1/users;sid=SECRET/7", (), "/v1/users"),  # matrix parameters left out
        (b"/v1", (), "/v1"),
        (b"/", (), "/"),
        (b"/api/caf%C3%A9/x", (), "/api/caf%C3%A9"),
    ],
)
def test_an_endpoint_is_the_allowed_prefix_or_two_segments(
    path: bytes, prefixes: tuple[str, ...], endpoint: str
) -> None:
    assert endpoint_of(normalise(path), prefixes) == endpoint


def test_method_outside_the_allowed_set_is_405_with_allow() -> None:
    with pytest.raises(ProxyError) as caught:
        check_method("DELETE", frozenset({"GET", "POST"}))
    assert caught.value.status == 405
    assert caught.value.headers["Allow"] == "GET, POST"
    check_method("POST", frozenset({"GET", "POST"}))


def test_an_image_only_connection_refuses_every_fetch_with_its_own_code() -> None:
    for method in ("GET", "POST", "DELETE"):
        with pytest.raises(ProxyError) as caught:
            check_method(method, frozenset())
        assert caught.value.code == "images_only"
        assert caught.value.status == 405
        assert caught.value.headers["Allow"] == ""  # RFC 9110: it allows no methods
        assert "public images only" in caught.value.message
