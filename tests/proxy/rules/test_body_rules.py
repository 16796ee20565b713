"""Parameters servers read from the query and the body: method overrides and the key's name."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.rules.body_rules import (
    MAX_INFLATED_BYTES,
    _BodyKind,
    _Readers,
    check_body,
    check_query,
)
from tests.proxy.serving import Tenant, running_proxy, upstream

ALLOWED = frozenset({"GET", "POST"})
FORM = [("Content-Type", "application/x-www-form-urlencoded")]
JSON = [("Content-Type", "application/json")]
BOUNDARY = "gh-boundary-7"
MULTIPART = [("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")]


def _body(
    headers: list[tuple[str, str]],
    body: bytes | list[bytes],
    key: str | None = None,
    allowed: frozenset[str] = ALLOWED,
) -> None:
    pieces = body if isinstance(body, list) else [body]
    asyncio.run(check_body("tenant", headers, pieces, allowed, key))


def _multipart(*parts: tuple[str, bytes]) -> bytes:
    """Parts as (their Content-Disposition parameters, their value)."""
    body = b"".join(
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; {params}\r\n\r\n".encode()
        + value
        + b"\r\n"
        for params, value in parts
    )
    return body + f"--{BOUNDARY}--\r\n".encode()


# What PHP, Rack, qs and the rest read as "_method".
OVERRIDE_NAMES = [
    "_method",
    "_METHOD",
    "_Method",
    ".method",
    "+_method",
    "%20_method",
    "_method[]",
    "_method[0]",
    "[_method]",
    "%5Fmethod",
    "_m%65thod",
    "_method%00x",
    "%EF%BC%BFmethod",  # FULLWIDTH LOW LINE
    "_%EF%BD%8D%EF%BD%85thod",  # fullwidth "me"
]


@pytest.mark.parametrize("name", OVERRIDE_NAMES)
def test_a_query_override_to_a_method_not_allowed_is_refused(name: str) -> None:
    with pytest.raises(ProxyError) as refused:
        check_query(f"a=1&{name}=DELETE".encode(), ALLOWED)
    assert refused.value.code == "method_not_allowed"
    assert refused.value.status == 405
    assert "_method" in refused.value.message
    assert "DELETE" in refused.value.message
    assert refused.value.headers["Allow"] == "GET, POST"


@pytest.mark.parametrize(
    "value", ["delete", "Delete", "PUT", "patch", "DEL%45TE", "%20DELETE", "DELETE+", "FOO"]
)
def test_every_reading_of_the_value_is_held_to_the_allowed_methods(value: str) -> None:
    with pytest.raises(ProxyError, match="_method"):
        check_query(f"_method={value}".encode(), ALLOWED)


@pytest.mark.parametrize(
    "query",
    [
        "_method=POST",
        "_method=get",
        "_method=",
        "_method",
        "_methods=DELETE",
        "x_method=DELETE",
        "method=DELETE",
        "payment_method=card",
        "q=caf%C3%A9&page=2",
        "",
    ],
)
def test_queries_without_an_override_to_a_method_not_allowed_pass(query: str) -> None:
    check_query(query.encode(), ALLOWED)


def test_an_override_to_an_allowed_method_passes() -> None:
    check_query(b"_method=DELETE", frozenset({"POST", "DELETE"}))
    _body(FORM, b"_method=delete", allowed=frozenset({"POST", "DELETE"}))
    _body(JSON, b'{"_method": "DELETE"}', allowed=frozenset({"POST", "DELETE"}))


OVERRIDING_BODIES = [
    (FORM, b"a=1&_method=DELETE"),
    (FORM, b"_m%65thod=delete&b=2"),
    (FORM, b"%5Fmethod=PUT"),
    (FORM, b"_method[]=PATCH"),
    ([("Content-Type", "Application/X-WWW-Form-URLEncoded; charset=UTF-8")], b"_method=DELETE"),
    ([("Content_Type", "application/x-www-form-urlencoded")], b"_method=DELETE"),
    (
        [("Content-Type", "application/x-www-form-urlencoded; charset=utf-16")],
        "_method=DELETE".encode("utf-16"),
    ),
    (JSON, b'{"_method": "DELETE"}'),
    (JSON, b'{"a": {"b": 1}, "_METHOD":"put"}'),
    (JSON, b'{"\\u005fmethod": "DELETE"}'),
    (JSON, b'{"_meth\\u006fd": "DEL\\u0045TE"}'),
    (JSON, b'{"_method": ["DELETE"]}'),  # Express's method-override takes an array's first
    (JSON, b'\xef\xbb\xbf {"a": {"b": [1, "]"]}, "c": "}", "_method": "DELETE"}'),
    (JSON, b'{"deep": ' + b"[" * 40 + b"]" * 40 + b', "_method": "DELETE"}'),
    (JSON, '{"_method": "DELETE"}'.encode("utf-16-le")),
    ([("Content-Type", "application/vnd.api+json")], b'{"_method": "DELETE"}'),
    (MULTIPART, _multipart(('name="a"', b"1"), ('name="_method"', b"DELETE"))),
    (MULTIPART, _multipart(("name=_method", b"delete"))),
    (MULTIPART, _multipart(("name*=utf-8''%5Fmethod", b"DELETE"))),
    (MULTIPART, _multipart(('name="=?utf-8?B?X21ldGhvZA==?="', b"DELETE"))),
    (MULTIPART, _multipart(('name="_m\\ethod"', b"DELETE"))),
    (MULTIPART, _multipart(('name="_method"', b"DELETE" + b" " * 100))),
]


@pytest.mark.parametrize(("headers", "body"), OVERRIDING_BODIES)
def test_a_body_override_to_a_method_not_allowed_is_refused(
    headers: list[tuple[str, str]], body: bytes
) -> None:
    with pytest.raises(ProxyError) as refused:
        _body(headers, body)
    assert refused.value.code == "method_not_allowed"
    assert "_method" in refused.value.message


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        (FORM, b"_method=POST&a=1"),
        (FORM, b"payment_method=card&method=DELETE"),
        (JSON, b'{"data": {"_method": "DELETE"}}'),  # nested: data, not a parameter
        (JSON, b'[{"_method": "DELETE"}]'),
        # No framework merges JSON past the top-level object (NDJSON, trailing data).
        (JSON, b'{"a": 1}\n{"_method": "DELETE"}\n'),
        (
            JSON,
            b'{"a": ' + b"[" * 40 + b'"_method", "DELETE"' + b"]" * 40 + b"}",
        ),
        (JSON, b'{"_method": null, "note": "_method: DELETE"}'),
        (JSON, b'{"title": "caf\\u00e9", "_method": "post"}'),
        (JSON, b"not json at all"),
        ([("Content-Type", "text/plain")], b"_method=DELETE"),
        ([("Content-Type", "application/octet-stream")], b'{"_method": "DELETE"}'),
        ([], b"_method=DELETE"),
        (MULTIPART, _multipart(('name="file"; filename="_method"', b"DELETE"))),
        (MULTIPART, _multipart(('name="_method"', b"POST"))),
    ],
)
def test_bodies_without_an_override_to_a_method_not_allowed_pass(
    headers: list[tuple[str, str]], body: bytes
) -> None:
    _body(headers, body)


# A body field named as the query parameter the key is injected as, which PHP's $_REQUEST, Rails'
# params, Laravel's input() and Spring's getParameter merge with the query's.
KEY_IN_BODY = [
    (FORM, b"a=1&api_key=forged"),
    (FORM, b"API.KEY=forged"),
    (FORM, b"api%5Fkey=forged"),
    (FORM, b"api_key[]=forged"),
    (FORM, b"api_%E2%84%AAey=forged"),  # KELVIN SIGN
    (JSON, b'{"api_key": "forged"}'),
    (JSON, b'{"Api-Key": 1}'),
    (JSON, b'{"api_\\u212aey": "forged"}'),
    (MULTIPART, _multipart(('name="api_key"', b"forged"))),
    (MULTIPART, _multipart(('name="file"; filename="x"; name="API.key"', b"forged"))),
]


@pytest.mark.parametrize(("headers", "body"), KEY_IN_BODY)
def test_a_body_field_named_as_the_query_key_is_refused(
    headers: list[tuple[str, str]], body: bytes
) -> None:
    with pytest.raises(ProxyError) as refused:
        _body(headers, body, key="api_key")
    assert refused.value.code == "invalid_body"
    assert refused.value.status == 400
    assert "API key" in refused.value.message


@pytest.mark.parametrize(("headers", "body"), KEY_IN_BODY)
def test_those_fields_pass_where_the_key_is_not_a_query_parameter(
    headers: list[tuple[str, str]], body: bytes
) -> None:
    _body(headers, body, key=None)


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        (FORM, b"api_keys=1&my_api_key=2"),
        (JSON, b'{"data": {"api_key": "nested"}, "api_keys": 1}'),
        (MULTIPART, _multipart(('name="file"; filename="api_key"', b"x"))),
    ],
)
def test_other_names_pass(headers: list[tuple[str, str]], body: bytes) -> None:
    _body(headers, body, key="api_key")


def test_a_name_split_across_the_pieces_a_body_arrived_in_is_found() -> None:
    with pytest.raises(ProxyError, match="_method"):
        _body(FORM, [b"a=" + b"x" * 70_000 + b"&_met", b"hod=DELETE"])
    with pytest.raises(ProxyError, match="_method"):
        _body(JSON, [b'{"a": "' + b"x" * 70_000 + b'", "_met', b'hod": "DELETE"}'])
    body = _multipart(("name=file", b"\x00\xff" * 40_000), ('name="_method"', b"DELETE"))
    split = body.index(b"_method") + 3
    with pytest.raises(ProxyError, match="_method"):
        _body(MULTIPART, [body[:split], body[split:]])


def test_large_bodies_are_read_whole() -> None:
    """Past the first look (in a thread, over 64 KiB), the override at the end is found."""
    rows = json.dumps([{"id": index, "name": "caf\u00e9"} for index in range(60_000)])
    _body(JSON, rows.encode())
    with pytest.raises(ProxyError, match="_method"):
        _body(JSON, b'{"rows": ' + rows.encode() + b', "_method": "DELETE"}')
    with pytest.raises(ProxyError, match="_method"):
        _body(FORM, b"q=%41" * 300_000 + b"&_method=DELETE")


def test_compressed_bodies_are_read_inflated() -> None:
    gzipped = [*JSON, ("Content-Encoding", "gzip")]
    with pytest.raises(ProxyError, match="_method"):
        _body(gzipped, gzip.compress(b'{"_method": "DELETE"}'))
    _body(gzipped, gzip.compress(b'{"_method": "POST"}'))
    deflated = [*FORM, ("Content-Encoding", "deflate")]
    with pytest.raises(ProxyError, match="_method"):
        _body(deflated, zlib.compress(b"_method=DELETE"))
    with pytest.raises(ProxyError) as refused:
        _body([*JSON, ("Content-Encoding", "br")], b"\x0b\x02\x80{}\x03")
    assert refused.value.code == "invalid_body"
    with pytest.raises(ProxyError) as refused:
        _body(gzipped, b"not gzip")
    assert refused.value.code == "invalid_body"
    bomb = gzip.compress(b"{" + b" " * MAX_INFLATED_BYTES + b"}")
    with pytest.raises(ProxyError) as refused:
        _body(gzipped, bomb)
    assert refused.value.code == "request_too_large"
    # A compressed body of a type no framework parses is not inflated.
    _body([("Content-Type", "application/octet-stream"), ("Content-Encoding", "br")], b"\x00")


def test_one_namespaces_slow_bodies_wait_for_each_other_not_for_others() -> None:
    """Bodies are read in worker threads, one namespace's one at a time."""
    readers = _Readers(workers=2)
    release = threading.Event()
    started: list[str] = []

    def read(kind: _BodyKind, pieces: Sequence[bytes]) -> None:
        started.append(kind.charsets[0])
        if kind.charsets[0].startswith("slow"):
            assert release.wait(timeout=10)

    async def scenario() -> list[str]:
        slow = [
            asyncio.create_task(readers.run("a", read, _BodyKind(charsets=[name]), []))
            for name in ("slow-1", "slow-2")
        ]
        await asyncio.sleep(0.05)
        await asyncio.wait_for(readers.run("b", read, _BodyKind(charsets=["quick"]), []), 5)
        seen = list(started)
        release.set()
        await asyncio.gather(*slow)
        return seen

    assert asyncio.run(scenario()) == ["slow-1", "quick"]
    assert readers._turns == {}


def test_two_different_content_types_are_refused_not_guessed() -> None:
    """Servers read the first, the last or both joined: which the upstream reads is unknown."""
    for headers in (
        [("Content-Type", "text/plain"), ("Content-Type", "application/x-www-form-urlencoded")],
        [("Content-Type", "text/plain"), ("Content_Type", "application/json")],
    ):
        with pytest.raises(ProxyError) as refused:
            _body(headers, b"a=1")
        assert refused.value.code == "invalid_body"
        assert "two different Content-Type headers" in refused.value.message
    _body([("Content-Type", "text/plain"), ("Content-Type", "text/plain ")], b"a=1")


def _counting_upstream(calls: list[str]) -> web.Application:
    async def echo(request: web.Request) -> web.Response:
        calls.append(request.path)
        return web.json_response(
            {"type": request.headers.getall("Content-Type", []), "body": await request.text()}
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    return app


FORM_OF_THE_CONNECTION = (("Content-Type", "application/x-www-form-urlencoded"),)


@pytest.mark.parametrize(
    ("tenant", "sent", "body", "code", "harmless"),
    [
        # The app labels its body text/plain; the connection sends it as a form.
        (
            {"headers": FORM_OF_THE_CONNECTION},
            "text/plain",
            b"_method=DELETE",
            "method_not_allowed",
            b"a=1",
        ),
        (
            {"headers": FORM_OF_THE_CONNECTION, "location": "query", "parameter": "api_key"},
            "text/plain",
            b"a=1&api_key=forged",
            "invalid_body",
            b"a=1",
        ),
        # In the charset the connection says, and compressed as the connection says.
        (
            {"headers": (("Content-Type", "application/x-www-form-urlencoded; charset=utf-16"),)},
            "text/plain",
            "_method=DELETE".encode("utf-16"),
            "method_not_allowed",
            "a=1".encode("utf-16"),
        ),
        (
            {"headers": (("Content-Type", "application/json"), ("Content-Encoding", "gzip"))},
            "application/octet-stream",
            gzip.compress(b'{"_method": "DELETE"}'),
            "method_not_allowed",
            gzip.compress(b'{"a": 1}'),
        ),
    ],
)
def test_the_rules_read_the_body_as_the_upstream_will(
    tmp_path: Path, tenant: dict[str, Any], sent: str, body: bytes, code: str, harmless: bytes
) -> None:
    """The connection's own Content-Type (spec.headers) is what the upstream parses the body
    by, whatever the app labelled it: the rules read that one, and the upstream hears nothing."""
    calls: list[str] = []
    if "location" in tenant:
        tenant = {**tenant, "auth": "apiKey", "secret": "sk_query_0123456789"}

    async def scenario() -> None:
        async with (
            upstream(_counting_upstream(calls)) as origin,
            running_proxy(tmp_path, [Tenant("one", origin, **tenant)]) as proxy,
            httpx.AsyncClient(timeout=10) as client,
        ):
            refused = await client.post(
                f"{proxy.url}/v1/fetch/api/things",
                content=body,
                headers={"Authorization": "Bearer app-token-one", "Content-Type": sent},
            )
            assert refused.json()["error"]["code"] == code, refused.text
            # A body without what the rules refuse reaches the upstream, typed as the
            # connection says.
            passed = await client.post(
                f"{proxy.url}/v1/fetch/api/things",
                content=harmless,
                headers={"Authorization": "Bearer app-token-one", "Content-Type": sent},
            )
            assert passed.status_code == 200, passed.text
            assert passed.json()["type"] == [tenant["headers"][0][1]]

    asyncio.run(scenario())
    assert calls == ["/things"]
