"""Hostile requests from an app, judged by what the real upstream received (issue 36).

Each class of request here reached the upstream as something the connection does not allow: a
path IIS reads as traversal, a query whose escapes were rewritten, headers and parameters that
servers read as the credential's or as another method, and headers that name objects outside the
allowed paths. Each is refused, or arrives neutralised, through the real proxy and API server.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    connection,
    data_app,
    fetch,
    received,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

QUERY_KEY_AUTH = {**API_KEY_AUTH, "apiKey": {"name": "key", "in": "query"}}
SECRET = "sk_hostile_0123456789"


def _linked(
    cluster: Cluster, stack: Stack, namespace: str, auth: dict[str, Any], **spec: Any
) -> str:
    """A connection named vendor (with the secret, if it takes one) and an app linking it."""
    apply(cluster, namespace, secret("vendor", **{"api-key": SECRET}))
    apply(cluster, namespace, connection("vendor", stack.upstream, auth, **spec))
    apply(cluster, namespace, data_app("sales", {"vendor": "vendor"}))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    return app_token(cluster, namespace, "dataapp-sales-gatehouse")


def _refused(response: httpx.Response, status: int, code: str) -> str:
    assert (response.status_code, response.json()["error"]["code"]) == (status, code), response.text
    return str(response.json()["error"]["message"])


def test_iis_u_escapes_in_the_path_are_refused(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(cluster, stack, namespace, {"type": "none"}, allowedPaths=["/echo/v1"])
    for path in (
        "/echo/v1/%25u002e%25u002e/admin",
        "/echo/v1/%25uFF0E%25uFF0E/admin",
        "/echo/v1/..%25u002fadmin",
        "/echo/v1/..%25u005cadmin",
        "/echo/v1/%EF%BC%85u002e%EF%BC%85u002e/admin",
    ):
        assert "%u" in _refused(fetch(stack.proxy, token, "vendor", path), 400, "invalid_path")
    assert received(stack.upstream, fetch(stack.proxy, token, "vendor", "/echo/v1/%25uber"))[
        "path"
    ] == ("/echo/v1/%25uber")


def test_the_query_reaches_the_upstream_as_the_app_wrote_it(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(cluster, stack, namespace, QUERY_KEY_AUTH)
    written = "phone=%2B15551234567&tz=%2B01:00&sig=ab%2Bcd%2F%3D%3D&api%2Bkey=x&t=%7e&b=abc=="
    seen = received(stack.upstream, fetch(stack.proxy, token, "vendor", f"/echo/v1?{written}"))
    assert seen["query"] == f"{written}&key={SECRET}"
    # Only what may not go raw is encoded: a stray "%", and bytes beyond ASCII.
    seen = received(
        stack.upstream, fetch(stack.proxy, token, "vendor", "/echo/v1?a=100%&q=caf\u00e9")
    )
    assert seen["query"] == f"a=100%25&q=caf%C3%A9&key={SECRET}"


def test_unicode_spellings_of_the_query_keys_name_are_removed(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(cluster, stack, namespace, QUERY_KEY_AUTH)
    forged = [
        "%E2%84%AAey",  # KELVIN SIGN: k to Go's EqualFold and Java's equalsIgnoreCase
        "%EF%BD%8B%EF%BD%85%EF%BD%99",  # fullwidth "key", NFKC
        "%u004Bey",  # classic ASP's %u escape
        "K%C4%98Y",  # not the key: E WITH OGONEK
    ]
    query = "&".join(f"{name}=forged" for name in forged) + "&q=1"
    seen = received(stack.upstream, fetch(stack.proxy, token, "vendor", f"/echo/v1?{query}"))
    assert seen["query"] == f"K%C4%98Y=forged&q=1&key={SECRET}"


def test_header_names_servers_read_as_the_credentials_or_their_own_are_dropped(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(cluster, stack, namespace, API_KEY_AUTH)
    sent = {
        "X.Api.Key": "forged",
        "X~API~KEY": "forged",
        "X*Api*Key": "forged",
        "X.Forwarded.Host": "evil.example",
        "X~Forwarded~Host": "evil.example",
        "X|Original|URL": "/admin",
        "Proxy": "http://evil.example:3128",
        "Script_Name": "/admin",
        "Script-Name": "/admin",
        "Content.Length": "5",
        "X-Trace.Id": "kept",
    }
    seen = received(stack.upstream, fetch(stack.proxy, token, "vendor", "/echo/v1", headers=sent))
    assert seen["headers"]["x-api-key"] == SECRET
    assert seen["headers"]["x-trace.id"] == "kept"
    for name in sent:
        if name != "X-Trace.Id":
            assert name.lower() not in seen["headers"], name


def test_method_overrides_to_methods_not_allowed_are_refused(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(cluster, stack, namespace, {"type": "none"}, allowedMethods=["GET", "POST"])

    def post(path: str = "/echo/v1", **kwargs: Any) -> httpx.Response:
        return fetch(stack.proxy, token, "vendor", path, method="POST", **kwargs)

    gzipped = gzip.compress(b'{"_method": "DELETE"}')
    refusals = [
        post("/echo/v1?_method=DELETE"),
        post("/echo/v1?%5Fmethod=delete"),
        post(data={"_method": "DELETE"}),
        post(data={".method": "PUT"}),
        post(json={"_method": "PATCH"}),
        post(files={"_method": (None, "DELETE")}),
        post(
            content=gzipped,
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        ),
    ]
    for reply in refusals:
        message = _refused(reply, 405, "method_not_allowed")
        assert "_method" in message
        assert reply.headers["allow"] == "GET, POST"
    # An override to an allowed method, and a nested field of that name, pass as they were.
    seen = received(stack.upstream, post(data={"_method": "POST", "a": "1"}))
    assert seen["body"] == "_method=POST&a=1"
    seen = received(stack.upstream, post(json={"data": {"_method": "DELETE"}}))
    assert seen["json"] == {"data": {"_method": "DELETE"}}


def test_the_query_keys_name_in_the_body_is_refused(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(cluster, stack, namespace, QUERY_KEY_AUTH, allowedMethods=["GET", "POST"])

    def post(**kwargs: Any) -> httpx.Response:
        return fetch(stack.proxy, token, "vendor", "/echo/v1", method="POST", **kwargs)

    for reply in (
        post(data={"key": "forged"}),
        post(data={"KEY[]": "forged"}),
        post(json={"Key": "forged"}),
        post(content=json.dumps({"\u212aey": "forged"}), headers={"Content-Type": "text/json"}),
        post(files={"key": (None, "forged")}),
    ):
        assert "API key" in _refused(reply, 400, "invalid_body")
    seen = received(stack.upstream, post(json={"data": {"key": "nested"}, "keys": 1}))
    assert seen["json"] == {"data": {"key": "nested"}, "keys": 1}
    assert seen["query"] == f"key={SECRET}"


def test_copy_sources_are_held_to_the_allowed_paths(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(
        cluster,
        stack,
        namespace,
        {"type": "none"},
        allowedMethods=["GET", "PUT"],
        allowedPaths=["/echo/v1"],
    )

    def put(headers: dict[str, str]) -> httpx.Response:
        return fetch(stack.proxy, token, "vendor", "/echo/v1/copy", method="PUT", headers=headers)

    for outside in (
        {"X-Amz-Copy-Source": "/echo/v2/secret"},
        {"X-Amz-Copy-Source": "echo/v1/../v2/secret"},
        {"X-Goog-Copy-Source": "echo/private"},
        {"x-ms-copy-source": f"http://127.0.0.2:{stack.upstream.rsplit(':', 1)[1]}/echo/v1/x"},
        {"x-ms-rename-source": "/echo/v2/x"},
        {"X.Amz.Copy.Source": "/echo/v2/secret"},
    ):
        reply = put(outside)
        assert reply.status_code in (400, 403), reply.text
        assert reply.json()["error"]["code"] in ("path_not_allowed", "path_traversal")
        assert next(iter(outside)).lower() in reply.json()["error"]["message"].lower()
    inside = {"X-Amz-Copy-Source": "echo/v1/original?versionId=3"}
    assert received(stack.upstream, put(inside))["headers"]["x-amz-copy-source"] == (
        "echo/v1/original?versionId=3"
    )
    same_origin = {"x-ms-copy-source": f"{stack.upstream}/echo/v1/original?sig=1"}
    assert "x-ms-copy-source" in received(stack.upstream, put(same_origin))["headers"]


def _arrived(stack: Stack, path: str) -> int:
    """How many requests for ``path`` (any query) reached the upstream."""
    arrivals = httpx.get(f"{stack.upstream}/_arrivals", timeout=5).json()
    return sum(
        count
        for line, count in arrivals.items()
        if line.partition(" ")[2].partition("?")[0] == path
    )


def test_the_body_rules_read_the_type_the_connection_sends(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """The grown suite's class 1: a connection whose own headers send every body as a form has
    the vendor parse as a form what the app labels text/plain. The rules read it as the vendor
    will, so a _method or the query key's name in it is refused, and the vendor hears nothing."""
    form = [{"name": "Content-Type", "value": "application/x-www-form-urlencoded"}]
    token = _linked(
        cluster, stack, namespace, QUERY_KEY_AUTH, allowedMethods=["GET", "POST"], headers=form
    )
    plain = {"Content-Type": "text/plain"}
    path = f"/echo/typed-{namespace}"

    def post(body: bytes, headers: dict[str, str]) -> httpx.Response:
        return fetch(
            stack.proxy, token, "vendor", path, method="POST", content=body, headers=headers
        )

    message = _refused(post(b"a=1&_method=DELETE", plain), 405, "method_not_allowed")
    assert "_method" in message
    assert "API key" in _refused(post(b"key=forged&a=1", plain), 400, "invalid_body")
    assert _arrived(stack, path) == 0
    seen = received(stack.upstream, post(b"a=1&_method=POST", plain))
    assert seen["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert seen["body"] == "a=1&_method=POST"
    assert _arrived(stack, path) == 1


def test_two_different_request_types_are_refused(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """Servers read the first, the last or both joined: refused rather than guessed at, whatever
    the body holds."""
    token = _linked(cluster, stack, namespace, {"type": "none"}, allowedMethods=["GET", "POST"])
    path = f"/echo/two-types-{namespace}"
    reply = httpx.post(
        f"{stack.proxy}/v1/fetch/vendor{path}",
        content=b"a=1",
        headers=[
            ("Authorization", f"Bearer {token}"),
            ("Content-Type", "text/plain"),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        timeout=30,
    )
    assert "two different Content-Type" in _refused(reply, 400, "invalid_body")
    assert _arrived(stack, path) == 0
