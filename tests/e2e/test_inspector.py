"""The inspector end to end: apps fetch through the real proxies, the operator gathers the
replicas' records over the table channel, and the service API and ``gatehouse requests`` show
them to whoever may see them."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from functools import partial
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    connection,
    data_app,
    fetch,
    project_members,
    run_cli,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

CANARY = "inspector-canary-5d1e"
QUERY_SECRET = "query-secret-8a2f"


def _project(cluster: Cluster, stack: Stack, namespace: str) -> dict[str, str]:
    apply(cluster, namespace, secret("vendor", **{"api-key": CANARY}))
    apply(
        cluster,
        namespace,
        connection("vendor", stack.upstream, API_KEY_AUTH, allowedMethods=["GET", "POST"]),
        data_app("board", {"api": "vendor"}),
        data_app("other", {"api": "vendor"}),
    )
    wait_condition(cluster, namespace, "externalconnection/vendor", "True")
    for app in ("board", "other"):
        wait_condition(cluster, namespace, f"dataapp/{app}", "True", "Routed")
    return {
        app: app_token(cluster, namespace, f"dataapp-{app}-gatehouse") for app in ("board", "other")
    }


def _get(stack: Stack, path: str, token: str, **params: Any) -> httpx.Response:
    return httpx.get(
        f"{stack.local.api_url}{path}",
        params=params,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def test_requests_are_shown_scrubbed_to_who_may_see_them(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    tokens = _project(cluster, stack, namespace)
    members = project_members(cluster, namespace)
    for proxy in stack.proxies:  # both replicas: the operator asks each
        reply = fetch(proxy.url, tokens["board"], "api", f"/echo/items?page=2&key={QUERY_SECRET}")
        assert reply.status_code == 200
    assert fetch(stack.proxy, tokens["other"], "api", "/echo/other").status_code == 200
    assert fetch(stack.proxy, tokens["board"], "nope", "/x").status_code == 404

    base = f"/api/v1/namespaces/{namespace}"
    found = _get(stack, f"{base}/connections/vendor/requests", members["admin"].token).json()
    assert found["replicasAsked"] == found["replicasAnswered"] >= 2
    paths = [(item["app"], item["path"]) for item in found["items"]]
    assert paths.count(("DataApp/board", "/echo/items?page=*&key=*")) == 2
    assert ("DataApp/other", "/echo/other") in paths
    assert len({item["replica"] for item in found["items"]}) >= 2
    first = found["items"][0]
    assert first["status"] == 200
    assert first["code"] == "ok"
    assert first["responseBytes"] > 0
    assert len(first["traceId"]) == 32

    # A builder sees the apps they may edit: board's own fetches, the alias that named nothing
    # too, and none of other's.
    builder = members["builder"].token
    mine = _get(stack, f"{base}/dataapps/board/requests", builder).json()["items"]
    assert {item["app"] for item in mine} == {"DataApp/board"}
    assert ("", 404, "unknown_alias") in {
        (item["connection"], item["status"], item["code"]) for item in mine
    }
    limited = _get(stack, f"{base}/dataapps/board/requests", builder, limit=1).json()["items"]
    assert len(limited) == 1
    assert limited[0]["time"] == max(item["time"] for item in mine)

    # No rights: 403 as for the connection's details; bad parameters name themselves.
    for member in ("nobody", "plain-viewer"):
        refused = _get(stack, f"{base}/connections/vendor/requests", members[member].token)
        assert refused.status_code == 403, refused.text
        refused = _get(stack, f"{base}/dataapps/board/requests", members[member].token)
        assert refused.status_code == 403, refused.text
    viewer = _get(stack, f"{base}/dataapps/board/requests", members["viewer"].token)
    assert viewer.status_code == 403
    bad = _get(stack, f"{base}/connections/vendor/requests", members["admin"].token, limit=0)
    assert bad.status_code == 400
    assert "limit" in bad.json()["error"]["message"]
    # Another namespace's: the builder may see nothing there (403, as for its details).
    other = _get(stack, "/api/v1/namespaces/default/connections/vendor/requests", builder)
    assert other.status_code == 403

    usage = _get(stack, f"{base}/connections/vendor/usage", members["admin"].token).json()
    by_app = {app["app"]: app["points"] for app in usage["apps"]}
    assert sum(point["requests"] for point in by_app["DataApp/board"]) == 2
    assert sum(point["requests"] for point in by_app["DataApp/other"]) == 1

    every = " ".join(
        _get(stack, path, members["admin"].token).text
        for path in (f"{base}/connections/vendor/requests", f"{base}/connections/vendor/usage")
    )
    for secret_value in (CANARY, QUERY_SECRET, tokens["board"], tokens["other"]):
        assert secret_value not in every


def test_gatehouse_requests_follows_fetches_as_they_happen_and_is_refused_without_rights(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    tokens = _project(cluster, stack, namespace)
    members = project_members(cluster, namespace)
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    args = [
        "requests", "vendor", "-n", namespace, "--server", stack.local.api_url, "--interval", "0.3",
    ]  # fmt: skip
    command = [sys.executable, "-m", "gatehouse_operator.cli.gatehouse", *args]

    refused = run_cli(
        cluster, "gatehouse_operator.cli.gatehouse", *args, "--token", members["nobody"].token
    )
    assert refused.returncode == 2
    assert "403" in refused.stderr
    assert members["nobody"].token not in refused.stderr + refused.stdout

    follow = subprocess.Popen(
        [*command, "-f", "--token", members["admin"].token],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert follow.stdout is not None
        for line in follow.stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        shown: list[str] = []

        def printed(fragment: str) -> bool:
            while not lines.empty():
                shown.append(lines.get())
            return any(fragment in line for line in shown)

        for index in range(3):
            marker = f"/echo/follow-{index}"
            started = time.monotonic()
            assert fetch(stack.proxy, tokens["board"], "api", f"{marker}?q=1").status_code == 200
            wait_for(partial(printed, f"{marker}?q=*"), timeout=15, interval=0.1, what=marker)
            assert time.monotonic() - started < 15
        assert sum("/echo/follow-0" in line for line in shown) == 1  # printed once
        assert all("DataApp/board" in line for line in shown if "/echo/follow" in line)
    finally:
        follow.terminate()
        follow.wait(timeout=10)
        reader.join(timeout=5)
        assert follow.stderr is not None
        follow.stderr.close()
        if follow.stdout:
            follow.stdout.close()
