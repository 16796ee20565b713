"""The viewer's identity end to end: kubectl-applied connections, a proxy replica of two workers
trusting the dev viewer issuer (gatehouse_dev.viewer_issuer, its JWKS on 127.0.0.1), the dev
upstream counting what arrives.

A connection with ``forwardViewerIdentity`` sends the API the app's, the viewer's and the
project's ids in the reserved headers, and never the assertion; a forged, expired,
wrong-audience or other app's assertion, or none, is a 401 that never reaches the API; an app
sending an ``X-Gatehouse-*`` header is refused; the operator refuses those names as a
connection's own headers.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.services import Endpoint
from gatehouse_dev.viewer_issuer import APP_CLAIM, AUDIENCE, sign
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    connection,
    connection_test,
    data_app,
    fetch,
    finished,
    project_members,
    received,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

ASSERTION = "Gatehouse-Viewer-Assertion"


class Issuer:
    def __init__(self, endpoint: Endpoint) -> None:
        self.url = endpoint.url

    def mint(self, app: str, sub: str, email: str = "", **asked: Any) -> str:
        body = {"app": app, "sub": sub, "email": email, **asked}
        answer = httpx.post(f"{self.url}/assertions", json=body, timeout=5)
        answer.raise_for_status()
        return str(answer.json()["assertion"])


@pytest.fixture(scope="module")
def viewers(stack: Stack) -> Iterator[tuple[Issuer, str]]:
    """The dev issuer, and a proxy replica (two workers) that trusts it."""
    endpoint = stack.local.start_viewer_issuer()
    trusted = [{"issuer": endpoint.url, "audience": AUDIENCE, "jwksURL": f"{endpoint.url}/jwks"}]
    proxy = stack.local.start_proxy(
        workers=2,
        settings={
            "GATEHOUSE_VIEWER_ISSUERS": json.dumps(trusted),
            "GATEHOUSE_AUDIT_LOG": "on",
        },
    )
    try:
        yield Issuer(endpoint), proxy.url
    finally:
        for server in (proxy.server, endpoint.server):
            server.stop()
            stack.local.servers.remove(server)


def _linked(cluster: Cluster, stack: Stack, namespace: str, **spec: Any) -> str:
    """A connection to the upstream with ``spec`` and the app 'sales' linking it as 'api'."""
    apply(
        cluster,
        namespace,
        secret("vendor", **{"api-key": "k-" + uuid.uuid4().hex}),
        connection("echo", stack.upstream, API_KEY_AUTH, **spec),
        data_app("sales", {"api": "echo"}),
    )
    wait_condition(cluster, namespace, "externalconnection/echo", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    return app_token(cluster, namespace, "dataapp-sales-gatehouse")


def _page(stack: Stack, token: str, path: str) -> str:
    """A page as a visitor signed in with ``token`` sees it (the session cookie, no browser)."""
    signed = httpx.post(
        f"{stack.local.api_url}/ui/sign-in",
        data={"token": token},
        headers={"Sec-Fetch-Site": "same-origin"},
        timeout=10,
    )
    cookie = signed.headers["set-cookie"].split(";", 1)[0]
    page = httpx.get(f"{stack.local.api_url}{path}", headers={"Cookie": cookie}, timeout=10)
    assert page.status_code == 200, page.text
    return page.text


def _arrived(stack: Stack, path: str) -> int:
    arrivals = httpx.get(f"{stack.upstream}/_arrivals", timeout=5).json()
    return sum(
        count for line, count in arrivals.items() if line.partition(" ")[2].split("?")[0] == path
    )


def test_a_connection_forwarding_the_viewer_sends_who_asks_and_never_the_assertion(
    cluster: Cluster, stack: Stack, namespace: str, viewers: tuple[Issuer, str]
) -> None:
    issuer, proxy = viewers
    token = _linked(cluster, stack, namespace, forwardViewerIdentity=True)
    app = f"{namespace}/DataApp/sales"
    for alg in ("RS256", "ES256"):
        assertion = issuer.mint(app, "u-42", "ada@example.com", alg=alg)
        answer = fetch(proxy, token, "api", "/echo/who", headers={ASSERTION: assertion})
        seen = received(stack.upstream, answer)
        headers = seen["headers"]
        assert headers["x-gatehouse-app-id"] == app
        assert headers["x-gatehouse-viewer-id"] == "u-42"
        assert headers["x-gatehouse-viewer-email"] == "ada@example.com"
        assert headers["x-gatehouse-project-id"] == namespace
        assert ASSERTION.lower() not in headers
        assert assertion not in json.dumps(seen)
        assert assertion.split(".")[2] not in json.dumps(seen)
    # No e-mail in the assertion: no e-mail header.
    answer = fetch(proxy, token, "api", "/echo/who", headers={ASSERTION: issuer.mint(app, "u-7")})
    headers = received(stack.upstream, answer)["headers"]
    assert headers["x-gatehouse-viewer-id"] == "u-7"
    assert "x-gatehouse-viewer-email" not in headers
    # The inspector shows whom each request was for (the id, not the e-mail).
    admin = project_members(cluster, namespace)["admin"].token
    found = httpx.get(
        f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connections/echo/requests",
        headers={"Authorization": f"Bearer {admin}"},
        timeout=10,
    ).json()
    assert [item["viewer"] for item in found["items"]] == ["u-7", "u-42", "u-42"]
    assert "ada@example.com" not in json.dumps(found)
    # The page shows the switch and exactly what it discloses; the wizard, the switch on.
    connections = f"/ui/namespaces/{namespace}/connections/echo"
    shown = _page(stack, admin, connections).split('id="viewer-identity"')[1].split("</dd>")[0]
    assert re.findall(r"<code>(X-Gatehouse-[\w-]+)</code>", shown) == [
        "X-Gatehouse-App-Id",
        "X-Gatehouse-Viewer-Id",
        "X-Gatehouse-Viewer-Email",
        "X-Gatehouse-Project-Id",
    ]
    wizard = _page(stack, admin, f"{connections}/edit")
    assert 'name="forward_viewer_identity" checked' in wizard
    assert "The API is told who asks" in wizard
    requests_tab = _page(stack, admin, f"{connections}/requests")
    assert "for u-42" in requests_tab


def test_a_connection_that_needs_no_viewer_strips_the_assertion_and_sends_no_identity(
    cluster: Cluster, stack: Stack, namespace: str, viewers: tuple[Issuer, str]
) -> None:
    issuer, proxy = viewers
    token = _linked(cluster, stack, namespace)
    assertion = issuer.mint(f"{namespace}/DataApp/sales", "u-42", "ada@example.com")
    for sent in ({ASSERTION: assertion}, {}, {ASSERTION: "not even a JWT"}):
        seen = received(stack.upstream, fetch(proxy, token, "api", "/echo/plain", headers=sent))
        assert not [name for name in seen["headers"] if "gatehouse" in name], seen["headers"]
        assert assertion not in json.dumps(seen)
    admin = project_members(cluster, namespace)["admin"].token
    page = _page(stack, admin, f"/ui/namespaces/{namespace}/connections/echo")
    assert "off: the API sees every request as the connection's one account" in page


def _forged(claims: dict[str, Any]) -> str:
    return sign(claims, rsa.generate_private_key(public_exponent=65537, key_size=2048), "rsa-1")


def test_bad_assertions_are_refused_with_401_and_never_reach_the_api(
    cluster: Cluster, stack: Stack, namespace: str, viewers: tuple[Issuer, str]
) -> None:
    issuer, proxy = viewers
    token = _linked(cluster, stack, namespace, forwardViewerIdentity=True)
    app = f"{namespace}/DataApp/sales"
    good = issuer.mint(app, "u-1")
    claims = json.loads(base64.urlsafe_b64decode(good.split(".")[1] + "=="))
    assert claims[APP_CLAIM] == app
    cases: dict[str, tuple[dict[str, str], str, str]] = {
        "missing": ({}, "viewer_assertion_missing", ASSERTION),
        "forged": ({ASSERTION: _forged(claims)}, "viewer_assertion_invalid", "signature"),
        "none": (
            {ASSERTION: sign(claims, None, "rsa-1", "none")},
            "viewer_assertion_invalid",
            "signature",
        ),
        "expired": (
            {ASSERTION: issuer.mint(app, "u-1", lifetime=60, issuedAgo=600)},
            "viewer_assertion_invalid",
            "expired",
        ),
        "audience": (
            {ASSERTION: issuer.mint(app, "u-1", audience="another-service")},
            "viewer_assertion_invalid",
            "audience",
        ),
        "other-app": (
            {ASSERTION: issuer.mint(f"{namespace}/DataApp/other", "u-1")},
            "viewer_assertion_invalid",
            "app",
        ),
        "too-long": (
            {ASSERTION: issuer.mint(app, "u-1", lifetime=3600)},
            "viewer_assertion_invalid",
            "lifetime",
        ),
    }
    for case, (headers, code, rule) in cases.items():
        path = f"/echo/refused-{case}-{uuid.uuid4().hex[:8]}"
        answer = fetch(proxy, token, "api", path, headers=headers)
        assert answer.status_code == 401, (case, answer.text)
        error = answer.json()["error"]
        assert error["code"] == code, (case, error)
        assert rule in error["message"], (case, error)
        assert _arrived(stack, path) == 0, case
    # The good one still passes: the refusals were the assertions', not the connection's.
    path = f"/echo/accepted-{uuid.uuid4().hex[:8]}"
    assert fetch(proxy, token, "api", path, headers={ASSERTION: good}).status_code == 200
    assert _arrived(stack, path) == 1


@pytest.mark.parametrize("forwarding", [True, False])
def test_an_app_sending_a_gatehouse_header_is_refused_and_the_api_hears_nothing(
    cluster: Cluster,
    stack: Stack,
    namespace: str,
    viewers: tuple[Issuer, str],
    forwarding: bool,
) -> None:
    issuer, proxy = viewers
    token = _linked(cluster, stack, namespace, forwardViewerIdentity=forwarding)
    assertion = issuer.mint(f"{namespace}/DataApp/sales", "u-1")
    for name in ("X-Gatehouse-Viewer-Id", "x_gatehouse_viewer_email", "X-Gatehouse-Anything"):
        path = f"/echo/spoof-{uuid.uuid4().hex[:8]}"
        answer = fetch(proxy, token, "api", path, headers={name: "admin", ASSERTION: assertion})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "reserved_header"
        assert _arrived(stack, path) == 0


def test_the_operator_refuses_gatehouse_names_as_a_connections_own_headers(
    cluster: Cluster, namespace: str
) -> None:
    for name in ("X-Gatehouse-Foo", "X_Gatehouse_Viewer_Id", "Gatehouse-Viewer-Assertion"):
        document = connection(
            "spoofing",
            "https://api.example.com",
            {"type": "none"},
            headers=[{"name": name, "value": "admin"}],
        )
        done = cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", stdin=json.dumps(document), check=False
        )
        assert done.returncode != 0, name
        assert "headers[].name must not be a header the proxy" in done.stderr, done.stderr
        assert "X-Gatehouse-*" in done.stderr
    key = {"type": "apiKey", "apiKey": {"name": "X-Gatehouse-Viewer-Id", "in": "header"}}
    key["secretRef"] = {"name": "vendor", "key": "api-key"}
    done = cluster.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=json.dumps(connection("spoofing", "https://api.example.com", key)),
        check=False,
    )
    assert done.returncode != 0
    assert "auth.apiKey.name must not be a header" in done.stderr


def test_a_connection_test_calls_as_no_viewer_and_sends_no_identity(
    cluster: Cluster, stack: Stack, namespace: str, viewers: tuple[Issuer, str]
) -> None:
    """An admin's test has no viewer to name: it needs no assertion, and tells the API nobody."""
    _linked(cluster, stack, namespace, forwardViewerIdentity=True)
    apply(cluster, namespace, connection_test("as-nobody", "echo", path="/echo/tested"))
    body = finished(cluster, namespace, "as-nobody")
    passed = next(c for c in body["status"]["conditions"] if c["type"] == "Passed")
    assert (passed["status"], passed["reason"]) == ("True", "Passed"), passed
    echoed = json.loads(body["status"]["response"]["body"])
    assert not [name for name in echoed["headers"] if "gatehouse" in name]


def test_a_cached_answer_is_never_another_viewers_whatever_the_scope(
    cluster: Cluster, stack: Stack, namespace: str, viewers: tuple[Issuer, str]
) -> None:
    """Issue 51: the connection's answers are shared between its apps (scope connection), but the
    vendor is told who asks, so each viewer's answer is theirs alone."""
    issuer, proxy = viewers
    token = _linked(
        cluster, stack, namespace, forwardViewerIdentity=True,
        cache={"ttlSeconds": 60, "maxTTLSeconds": 600, "scope": "connection"},
    )  # fmt: skip
    app = f"{namespace}/DataApp/sales"
    seen: dict[str, set[str]] = {}
    for sub in ("ada", "bob", "ada", "bob"):
        answer = fetch(
            proxy, token, "api", "/cacheable/mine", headers={ASSERTION: issuer.mint(app, sub)}
        )
        assert answer.status_code == 200, answer.text
        seen.setdefault(sub, set()).add(answer.json()["id"])
    assert len(seen["ada"]) == len(seen["bob"]) == 1
    assert seen["ada"] != seen["bob"]
    assert _arrived(stack, "/cacheable/mine") == 2
