"""kubectl-applied resources -> a fetch through the proxy -> a real upstream seeing the credential.

The app holds only its own proxy credential; every check below is on what the upstream received
and what the app got back.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from functools import partial
from typing import Any

import httpx
import pytest
import yaml

from gatehouse_dev.cluster import Cluster, secret_watch_events
from gatehouse_dev.resources import unwatched_secret
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import READ_TIMEOUT_SECONDS, Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    condition,
    connection,
    data_app,
    fetch,
    get,
    received,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e


def _linked(
    cluster: Cluster, stack: Stack, namespace: str, auth: dict[str, Any], **spec: Any
) -> str:
    """Applies a connection named vendor and an app linking it as 'vendor'; returns the token."""
    apply(cluster, namespace, connection("vendor", stack.upstream, auth, **spec))
    apply(cluster, namespace, data_app("sales", {"vendor": "vendor"}))
    wait_condition(cluster, namespace, "externalconnection/vendor", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    return app_token(cluster, namespace, "dataapp-sales-gatehouse")


def _until_status(proxy: str, token: str, status: int) -> httpx.Response:
    def answered() -> httpx.Response | None:
        reply = fetch(proxy, token, "vendor", "/echo/")
        return reply if reply.status_code == status else None

    return wait_for(answered, timeout=10, what=f"HTTP {status} from the proxy")


def _key_seen(stack: Stack, proxy: str, token: str) -> str:
    return str(
        received(stack.upstream, fetch(proxy, token, "vendor", "/echo/"))["headers"]["x-api-key"]
    )


def test_auth_none_sends_no_credential(cluster: Cluster, stack: Stack, namespace: str) -> None:
    token = _linked(cluster, stack, namespace, {"type": "none"})
    seen = received(
        stack.upstream, fetch(stack.proxy, token, "vendor", "/echo/v1/users", params={"page": "2"})
    )
    assert seen["path"] == "/echo/v1/users"
    assert seen["query"] == "page=2"
    assert "authorization" not in seen["headers"]


def test_api_key_header_overrides_the_apps_value(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": "sk_live_header"}))
    token = _linked(cluster, stack, namespace, API_KEY_AUTH)
    reply = fetch(
        stack.proxy,
        token,
        "vendor",
        "/echo/v1",
        headers={
            "X-API-Key": "forged",
            "Cookie": "s=1",
            "X-Forwarded-Host": "evil.example",
            "Accept-Encoding": "gzip",
        },
    )
    seen = received(stack.upstream, reply)
    assert seen["headers"]["x-api-key"] == "sk_live_header"
    assert seen["headers"]["accept-encoding"] == "identity"  # so the answer can be scrubbed
    # The upstream echoed the key back; the app's copy of that answer does not hold it.
    assert reply.json()["headers"]["x-api-key"] == "[redacted]"
    assert "sk_live_header" not in reply.text
    assert "cookie" not in seen["headers"]
    assert "x-forwarded-host" not in seen["headers"]
    assert seen["headers"]["host"] == stack.upstream.removeprefix("http://")
    assert "set-cookie" not in reply.headers
    assert "x-internal-trace" not in reply.headers
    assert reply.headers["x-ratelimit-remaining"] == "99"
    assert "sk_live_header" not in json.dumps(dict(reply.headers))


def test_api_key_query_overrides_the_apps_parameter(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": "sk live/query"}))
    auth = {**API_KEY_AUTH, "apiKey": {"name": "key", "in": "query"}}
    token = _linked(cluster, stack, namespace, auth)
    reply = fetch(stack.proxy, token, "vendor", "/echo/v1", params={"key": "forged", "q": "x"})
    assert received(stack.upstream, reply)["query"] == "q=x&key=sk%20live%2Fquery"
    assert reply.json()["query"] == "q=x&key=[redacted]"
    link = fetch(stack.proxy, token, "vendor", "/echo/v1", params={"q": "x"}).headers["link"]
    assert "page=2" in link
    assert "key=[redacted]" in link


def test_an_api_key_named_authorization_carries_the_whole_value(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """Some APIs want ``Authorization: Token abc`` or a key without "Bearer": the Secret holds
    the whole value, and the app's own Authorization (its proxy credential) never passes."""
    apply(cluster, namespace, secret("vendor", **{"api-key": "Token abc-123"}))
    auth = {**API_KEY_AUTH, "apiKey": {"name": "Authorization", "in": "header"}}
    token = _linked(cluster, stack, namespace, auth)
    reply = fetch(stack.proxy, token, "vendor", "/echo/v1")
    seen = received(stack.upstream, reply)
    assert seen["headers"]["authorization"] == "Token abc-123"
    assert reply.json()["headers"]["authorization"] == "[redacted]"
    assert token not in str(seen)


def test_basic_auth_sends_the_pair(cluster: Cluster, stack: Stack, namespace: str) -> None:
    apply(cluster, namespace, secret("vendor", pair="ana:p4ss w0rd"))
    auth = {"type": "basic", "secretRef": {"name": "vendor", "key": "pair"}}
    token = _linked(cluster, stack, namespace, auth)
    reply = fetch(stack.proxy, token, "vendor", "/echo/v1")
    seen = received(stack.upstream, reply)
    assert seen["headers"]["authorization"] == "Basic YW5hOnA0c3MgdzByZA=="
    assert "YW5hOnA0c3MgdzByZA" not in reply.text
    assert "p4ss w0rd" not in reply.text


def test_an_answer_of_a_type_the_connection_does_not_allow_is_refused(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(
        cluster, stack, namespace, {"type": "none"}, allowedContentTypes=["application/json"]
    )
    assert fetch(stack.proxy, token, "vendor", "/echo/v1").status_code == 200
    reply = fetch(stack.proxy, token, "vendor", "/big", params={"bytes": "10", "fill": "percent"})
    assert (reply.status_code, reply.json()["error"]["code"]) == (502, "content_type_not_allowed")
    assert "'text/plain'" in reply.json()["error"]["message"]
    assert "%41" not in reply.text


def test_the_connections_own_headers_replace_the_apps(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """Vendors' required versions: sent on every request, whatever the app sent under that name,
    in any spelling a server would read as it."""
    headers = [
        {"name": "Notion-Version", "value": "2022-06-28"},
        {"name": "Accept", "value": "application/vnd.github+json"},
    ]
    token = _linked(cluster, stack, namespace, {"type": "none"}, headers=headers)
    reply = fetch(
        stack.proxy,
        token,
        "vendor",
        "/echo/v1",
        headers={"Notion-Version": "2020-01-01", "Notion_Version": "1999", "X-Other": "kept"},
    )
    seen = received(stack.upstream, reply)
    assert seen["headers"]["notion-version"] == "2022-06-28"
    assert "notion_version" not in seen["headers"]
    assert seen["headers"]["accept"] == "application/vnd.github+json"
    assert seen["headers"]["x-other"] == "kept"


def test_bearer_token(cluster: Cluster, stack: Stack, namespace: str) -> None:
    apply(cluster, namespace, secret("vendor", token="bearer-secret-7"))
    auth = {"type": "bearer", "secretRef": {"name": "vendor", "key": "token"}}
    token = _linked(cluster, stack, namespace, auth)
    reply = fetch(stack.proxy, token, "vendor", "/echo/v1")
    seen = received(stack.upstream, reply)
    assert reply.json()["headers"]["authorization"] == "Bearer [redacted]"
    # The app's own Authorization (its proxy credential) is replaced, never forwarded.
    assert seen["headers"]["authorization"] == "Bearer bearer-secret-7"
    assert token not in str(seen)


def test_google_service_account_exchanges_once_for_500_concurrent_requests(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "vendor"},
            "stringData": {"key.json": stack.service_account_key.decode()},
        },
    )
    scope = "https://www.googleapis.com/auth/bigquery.readonly"
    auth = {
        "type": "googleServiceAccount",
        "googleServiceAccount": {"scopes": [scope]},
        "secretRef": {"name": "vendor", "key": "key.json"},
    }
    token = _linked(cluster, stack, namespace, auth, limits={"requestsPerMinute": 100_000})
    before = httpx.get(f"{stack.token_endpoint}/stats").json()["exchanges"]

    async def many() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            headers = {"Authorization": f"Bearer {token}"}
            url = f"{stack.proxy}/v1/fetch/vendor/echo/v1"
            return await asyncio.gather(*(client.get(url, headers=headers) for _ in range(500)))

    replies = asyncio.run(many())
    assert [reply.status_code for reply in replies] == [200] * 500
    with httpx.Client(base_url=stack.upstream, timeout=10) as upstream:
        seen = [upstream.get(f"/_received/{reply.json()['id']}").json() for reply in replies]
    bearer = {record["headers"]["authorization"] for record in seen}
    assert len(bearer) == 1
    access_token = bearer.pop().removeprefix("Bearer ")
    info = httpx.get(f"{stack.token_endpoint}/tokeninfo", params={"access_token": access_token})
    assert info.json()["scope"] == scope
    assert httpx.get(f"{stack.token_endpoint}/stats").json()["exchanges"] == before + 1


def test_rotated_secret_reaches_the_proxy_within_seconds(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": "before"}))
    token = _linked(cluster, stack, namespace, API_KEY_AUTH)
    assert _key_seen(stack, stack.proxy, token) == "before"
    apply(cluster, namespace, secret("vendor", **{"api-key": "after"}))
    started = time.monotonic()
    for proxy in stack.proxies:

        def rotated(url: str = proxy.url) -> bool:
            return _key_seen(stack, url, token) == "after"

        wait_for(rotated, timeout=10, what="the rotated key at the proxy")
    assert time.monotonic() - started < 10


def test_a_secret_without_the_watch_label_works_and_says_how_to_label_it(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, unwatched_secret("vendor", **{"api-key": "sk-unlabelled"}))
    token = _linked(cluster, stack, namespace, API_KEY_AUTH)
    assert _key_seen(stack, stack.proxy, token) == "sk-unlabelled"
    resource = "externalconnection/vendor"

    def watched(status: str) -> dict[str, Any] | None:
        found = condition(cluster, namespace, resource, "CredentialWatched")
        return found if found.get("status") == status else None

    unwatched = wait_for(partial(watched, "False"), timeout=10, what="CredentialWatched=False")
    assert unwatched["reason"] == "SecretNotLabelled"
    assert "kubectl label secret vendor gatehouse.dev/credential=true" in unwatched["message"]
    events = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
    warned = [e for e in events["items"] if e["reason"] == "SecretNotLabelled"]
    assert [e["type"] for e in warned] == ["Warning"]
    assert "sk-unlabelled" not in json.dumps(events)

    cluster.kubectl("label", "secret", "vendor", "-n", namespace, "gatehouse.dev/credential=true")
    wait_for(partial(watched, "True"), timeout=10, what="CredentialWatched=True once labelled")
    apply(cluster, namespace, secret("vendor", **{"api-key": "labelled"}))
    wait_for(
        lambda: _key_seen(stack, stack.proxy, token) == "labelled",
        timeout=10,
        what="the rotation of a labelled Secret at the proxy",
    )


def test_unrelated_secrets_never_reach_the_operator(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """The API server filters the operator's Secret watch: 100 Secrets of 100 KiB (a cluster's
    Helm releases) are never sent to it, by the API server's count of the Secret watch events it
    sent: its own watcher takes one per Secret, an unfiltered operator would take another. A
    labelled Secret applied after them is seen, so the watch delivered all it was going to."""
    before = secret_watch_events(cluster)
    payload = "x" * 100 * 1024
    unrelated = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"sh.helm.release.v1.app{index}.v1"},
            "type": "helm.sh/release.v1",
            "stringData": {"release": payload},
        }
        for index in range(100)
    ]
    cluster.kubectl("create", "-n", namespace, "-f", "-", stdin=yaml.safe_dump_all(unrelated))
    apply(cluster, namespace, secret("vendor", **{"api-key": "after-the-flood"}))
    token = _linked(cluster, stack, namespace, API_KEY_AUTH)
    assert _key_seen(stack, stack.proxy, token) == "after-the-flood"
    # 100 for the API server's own watcher, a few for the labelled ones (the vendor's and the
    # app's credential, to both watchers); 200 and more were the operator's watch unfiltered.
    assert secret_watch_events(cluster) - before < 150


def test_deleted_secret_makes_the_connection_unavailable_not_stale(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": "soon-gone"}))
    token = _linked(cluster, stack, namespace, API_KEY_AUTH)
    cluster.kubectl("delete", "secret", "vendor", "-n", namespace)
    wait_condition(cluster, namespace, "externalconnection/vendor", "False", "SecretNotFound")
    reply = _until_status(stack.proxy, token, 503)
    assert reply.json()["error"]["code"] == "connection_unavailable"
    assert "soon-gone" not in reply.text
    wait_condition(cluster, namespace, "dataapp/sales", "False", "ConnectionNotReady")
    events = cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    assert "SecretNotFound" in events
    assert "soon-gone" not in events


def test_deleted_connection_removes_the_route(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(cluster, stack, namespace, {"type": "none"})
    # Nothing waits on the operator to let a connection or an app go.
    for resource in ("externalconnection/vendor", "dataapp/sales"):
        assert not (get(cluster, namespace, resource) or {})["metadata"].get("finalizers")
    cluster.kubectl("delete", "externalconnection", "vendor", "-n", namespace, "--timeout=20s")
    reply = _until_status(stack.proxy, token, 404)
    assert reply.json()["error"]["code"] == "unknown_alias"
    wait_condition(cluster, namespace, "dataapp/sales", "False", "ConnectionNotFound")


def test_the_finalizer_of_earlier_versions_is_taken_off(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    legacy = connection("vendor", stack.upstream, {"type": "none"})
    legacy["metadata"]["finalizers"] = ["gatehouse.dev/finalizer"]
    apply(cluster, namespace, legacy)
    wait_for(
        lambda: (
            not (get(cluster, namespace, "externalconnection/vendor") or {})["metadata"].get(
                "finalizers"
            )
        ),
        timeout=20,
        what="the old finalizer removed",
    )
    cluster.kubectl("delete", "externalconnection", "vendor", "-n", namespace, "--timeout=20s")


def test_limits_and_refusals(cluster: Cluster, stack: Stack, namespace: str) -> None:
    token = _linked(
        cluster,
        stack,
        namespace,
        {"type": "none"},
        allowedMethods=["GET", "POST"],
        allowedPaths=["/echo/v1", "/big", "/redirect", "/slow"],
        limits={"timeoutSeconds": 1, "maxRequestBytes": 1000, "maxResponseBytes": 100_000},
    )
    cases = [
        (fetch(stack.proxy, token, "vendor", "/echo/v2"), 403, "path_not_allowed"),
        (fetch(stack.proxy, token, "vendor", "/echo/v1/%2e%2e/v2"), 400, "path_traversal"),
        (
            fetch(stack.proxy, token, "vendor", "/echo/v1", method="DELETE"),
            405,
            "method_not_allowed",
        ),
        (fetch(stack.proxy, token, "other", "/echo/v1"), 404, "unknown_alias"),
        (fetch(stack.proxy, "wrong", "vendor", "/echo/v1"), 401, "unauthenticated"),
        (fetch(stack.proxy, token, "vendor", "/redirect"), 502, "upstream_redirect"),
        (
            fetch(stack.proxy, token, "vendor", "/big", params={"bytes": "200000"}),
            502,
            "response_too_large",
        ),
        (
            fetch(stack.proxy, token, "vendor", "/slow", params={"seconds": "3"}),
            504,
            "upstream_timeout",
        ),
        (
            fetch(stack.proxy, token, "vendor", "/echo/v1", method="POST", content=b"x" * 1001),
            413,
            "request_too_large",
        ),
        # The rules run in order and the body is read last: a path refusal wins over size.
        (
            fetch(stack.proxy, token, "vendor", "/echo/v2", method="POST", content=b"x" * 1001),
            403,
            "path_not_allowed",
        ),
    ]
    for reply, status, code in cases:
        assert (reply.status_code, reply.json()["error"]["code"]) == (status, code), reply.text
    streamed = fetch(
        stack.proxy, token, "vendor", "/big", params={"bytes": "99000", "chunked": "1"}
    )
    assert len(streamed.content) == 99000


def test_an_image_only_connection_serves_img_src_and_refuses_every_fetch(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(
        cluster, stack, namespace, {"type": "none"}, allowedMethods=[], allowPublicImages=True
    )
    for method in ("GET", "POST"):
        reply = fetch(stack.proxy, token, "vendor", "/echo/v1", method=method)
        assert reply.status_code == 405, reply.text
        assert reply.json()["error"]["code"] == "images_only"
        assert reply.headers["allow"] == ""


def test_answers_that_fail_after_their_headers_are_cut_off_cleanly(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """Once the headers are out, a failure can only break the stream: the app sees a broken
    response (never a silently short one), the proxy logs one line and counts it, no traceback."""
    token = _linked(
        cluster,
        stack,
        namespace,
        {"type": "none"},
        allowedPaths=["/big", "/broken"],
        limits={"timeoutSeconds": 1, "maxResponseBytes": 100_000},
    )
    cases = {
        "response_too_large": ("/big", {"bytes": "300000", "chunked": "1"}),
        "upstream_failed": ("/broken", {}),
        "upstream_timeout": ("/broken", {"then": "stall", "seconds": "5"}),
    }
    for path, params in cases.values():
        with pytest.raises(httpx.RemoteProtocolError):
            fetch(stack.proxy, token, "vendor", path, params=params)
    metrics = httpx.get(f"{stack.proxies[0].admin_url}/metrics", timeout=5).text
    log = stack.proxies[0].server.log_path.read_text()
    for code in cases:
        assert (
            f'gatehouse_proxy_responses_cut_total{{app="sales",app_kind="DataApp",code="{code}",'
            f'connection="vendor",namespace="{namespace}"}} 1.0' in metrics
        )
        assert (
            f"cut off the answer from {namespace}/vendor to {namespace}/DataApp/sales: {code}"
            in log
        )
    assert "Traceback" not in log
    # The connection is still fine for the next request.
    assert fetch(stack.proxy, token, "vendor", "/big", params={"bytes": "10"}).status_code == 200


def test_slow_clients_are_cut_off_at_the_read_deadline(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """A head that never ends is disconnected; a body that never comes is answered 408."""
    token = _linked(cluster, stack, namespace, {"type": "none"}, allowedMethods=["GET", "POST"])
    address = ("127.0.0.1", int(stack.proxy.rsplit(":", 1)[1]))
    head = (
        f"POST /v1/fetch/vendor/echo/ HTTP/1.1\r\nHost: proxy\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: 10\r\n"
    ).encode()
    budget = READ_TIMEOUT_SECONDS + 5
    with socket.create_connection(address, timeout=budget) as unfinished:
        unfinished.sendall(head)  # and never the blank line that ends it
        assert unfinished.recv(1024) == b""
    with socket.create_connection(address, timeout=budget) as bodiless:
        bodiless.sendall(head + b"\r\n")  # and never the 10 bytes of body
        answer = b""
        while chunk := bodiless.recv(4096):
            answer += chunk
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout"
    assert b'"code":"request_timeout"' in rest


def test_rate_limit_answers_429_with_retry_after(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    # 3 a minute, across both replicas: the minute's number at once, then 429.
    token = _linked(cluster, stack, namespace, {"type": "none"}, limits={"requestsPerMinute": 3})
    replicas = [proxy.url for proxy in stack.proxies]
    statuses = [
        fetch(replicas[index % 2], token, "vendor", "/echo/").status_code for index in range(4)
    ]
    assert statuses == [200, 200, 200, 429]
    limited = fetch(stack.proxy, token, "vendor", "/echo/")
    assert 1 <= int(limited.headers["retry-after"]) <= 61


def test_chart_types_link_like_data_apps(cluster: Cluster, stack: Stack, namespace: str) -> None:
    apply(cluster, namespace, connection("tiles", stack.upstream, {"type": "none"}))
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "gatehouse.dev/v1alpha1",
            "kind": "ChartType",
            "metadata": {"name": "heatmap"},
            "spec": {"connections": [{"alias": "tiles", "connection": "tiles"}]},
        },
    )
    wait_condition(cluster, namespace, "charttype/heatmap", "True", "Routed")
    token = app_token(cluster, namespace, "charttype-heatmap-gatehouse")
    reply = fetch(stack.proxy, token, "tiles", "/echo/z/1/2")
    assert received(stack.upstream, reply)["path"] == "/echo/z/1/2"


def test_metrics_are_per_connection_and_app_without_paths_or_secrets(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": "sk_metrics_secret"}))
    token = _linked(cluster, stack, namespace, API_KEY_AUTH)
    fetch(stack.proxy, token, "vendor", "/echo/v1/private-path", params={"q": "query-value"})
    fetch(stack.proxy, token, "vendor", "/echo/v1", method="DELETE")
    metrics = httpx.get(f"{stack.proxies[0].admin_url}/metrics", timeout=5).text
    assert (
        'gatehouse_proxy_requests_total{app="sales",app_kind="DataApp",code="ok",'
        f'connection="vendor",method="GET",namespace="{namespace}",status="2xx"}}' in metrics
    )
    assert f'gatehouse_proxy_request_duration_seconds_count{{namespace="{namespace}"}}' in metrics
    assert 'code="method_not_allowed"' in metrics
    for leaked in ("private-path", "query-value", "sk_metrics_secret", token):
        assert leaked not in metrics
    # Not on the port apps call: the series name every tenant's apps and connections.
    assert httpx.get(f"{stack.proxy}/metrics", timeout=5).status_code == 404
