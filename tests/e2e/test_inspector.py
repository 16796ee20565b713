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
    # A connection without a cache: no calls saved, the points as before.
    assert not [point for points in by_app.values() for point in points if "cached" in point]

    every = " ".join(
        _get(stack, path, members["admin"].token).text
        for path in (f"{base}/connections/vendor/requests", f"{base}/connections/vendor/usage")
    )
    for secret_value in (CANARY, QUERY_SECRET, tokens["board"], tokens["other"]):
        assert secret_value not in every


HIDDEN_PATH = "/echo/payroll-export"


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


def test_an_apps_requests_through_a_connection_hidden_from_the_caller_show_no_details(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """R4-9: build-spec hides an AdminsOnly connection from a builder (detailsHidden) and its
    own requests are 404 to them; the app's requests, on the service API, the page and
    ``gatehouse requests``, show its fetches through it only as build-spec shows the link: when,
    the connection's name, status and code; never the method, path, query names or sizes."""
    apply(cluster, namespace, secret("vendor", **{"api-key": CANARY}))
    apply(
        cluster,
        namespace,
        connection("open", stack.upstream, API_KEY_AUTH),
        connection("locked", stack.upstream, API_KEY_AUTH, linkPolicy="AdminsOnly"),
        data_app("payroll", {"pay": "locked", "web": "open"}),  # linked by the admin
    )
    wait_condition(cluster, namespace, "dataapp/payroll", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-payroll-gatehouse")
    members = project_members(cluster, namespace)
    assert fetch(stack.proxy, token, "pay", f"{HIDDEN_PATH}?tenant=7").status_code == 200
    assert fetch(stack.proxy, token, "web", "/echo/open-items?page=2").status_code == 200

    base = f"/api/v1/namespaces/{namespace}"
    builder, admin = members["builder"].token, members["admin"].token
    spec = _get(stack, f"{base}/dataapps/payroll/build-spec", builder).json()
    assert {link["connection"]: link["detailsHidden"] for link in spec["connections"]} == {
        "locked": True,
        "open": False,
    }
    assert _get(stack, f"{base}/connections/locked/requests", builder).status_code == 404

    answer = _get(stack, f"{base}/dataapps/payroll/requests", builder)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    items = {item["connection"]: item for item in found["items"]}
    assert set(items["locked"]) == {
        "time", "app", "connection", "status", "code", "replica", "traceId", "detailsHidden",
    }  # fmt: skip
    assert (items["locked"]["status"], items["locked"]["detailsHidden"]) == (200, True)
    assert items["open"]["path"] == "/echo/open-items?page=*"
    assert items["open"]["detailsHidden"] is False
    assert "'locked'" in found["hiddenReason"]
    page = _page(stack, builder, f"/ui/namespaces/{namespace}/dataapps/payroll/requests")
    shown = run_cli(
        cluster, "gatehouse_operator.cli.gatehouse", "requests", "--app", "DataApp/payroll",
        "-n", namespace, "--server", stack.local.api_url, "--token", builder,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "DataApp/payroll -> locked (details hidden) 200 ok" in shown.stdout
    assert "/echo/open-items?page=*" in shown.stdout
    assert 'data-connection="locked" data-details-hidden="true"' in page
    for seen in (answer.text, page, shown.stdout):
        assert "payroll-export" not in seen
        assert "tenant" not in seen

    # The admin may see the connection: its fetches whole, everywhere.
    whole = _get(stack, f"{base}/dataapps/payroll/requests", admin).json()
    assert whole["hiddenReason"] == ""
    assert [item["path"] for item in whole["items"] if item["connection"] == "locked"] == [
        f"{HIDDEN_PATH}?tenant=*"
    ]
    assert "payroll-export" in _page(
        stack, admin, f"/ui/namespaces/{namespace}/dataapps/payroll/requests"
    )


class Follower:
    """``gatehouse requests -f`` running, its lines read as they come."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.shown: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def printed(self, fragment: str, count: int = 1) -> bool:
        while not self.lines.empty():
            self.shown.append(self.lines.get())
        return sum(fragment in line for line in self.shown) >= count

    def stop(self) -> str:
        """Ends it; what it said on stderr."""
        self.process.terminate()
        self.process.wait(timeout=10)
        self.reader.join(timeout=5)
        assert self.process.stderr is not None
        said = self.process.stderr.read()
        self.process.stderr.close()
        if self.process.stdout:
            self.process.stdout.close()
        return said


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

    follow = Follower([*command, "-f", "--token", members["admin"].token], env)
    try:
        for index in range(3):
            marker = f"/echo/follow-{index}"
            started = time.monotonic()
            assert fetch(stack.proxy, tokens["board"], "api", f"{marker}?q=1").status_code == 200
            wait_for(
                partial(follow.printed, f"{marker}?q=*"), timeout=15, interval=0.1, what=marker
            )
            assert time.monotonic() - started < 15
        assert sum("/echo/follow-0" in line for line in follow.shown) == 1  # printed once
        assert all("DataApp/board" in line for line in follow.shown if "/echo/follow" in line)
    finally:
        follow.stop()


def test_gatehouse_requests_follows_a_burst_larger_than_its_page_each_line_once(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """Issue 50: ``-f --limit 3`` printed 6 of a burst of 10 (and once old lines twice). It
    follows with the cursor each answer gives, over every replica and worker the operator
    asks (the two stack replicas and one of two workers here), with the names ``source
    .gatehouse/dev/env`` exports: every fetch once, whatever the page; and when more end
    between two asks than a worker keeps (200 per connection), it says how many it lost."""
    tokens = _project(cluster, stack, namespace)
    members = project_members(cluster, namespace)
    workers = stack.local.start_proxy(workers=2)
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "GATEHOUSE_API_URL": stack.local.api_url,
        "GATEHOUSE_TOKEN": members["admin"].token,
    }
    command = [
        sys.executable, "-m", "gatehouse_operator.cli.gatehouse", "requests", "vendor",
        "-n", namespace, "-f", "--limit", "3",
    ]  # fmt: skip
    try:

        def both_workers_serve() -> bool:  # each connection goes to either worker
            warm = (fetch(workers.url, tokens["board"], "api", "/echo/warm") for _ in range(8))
            return all(reply.status_code == 200 for reply in warm)

        wait_for(both_workers_serve, timeout=60, interval=0.5, what="the two workers' table")
        for index in range(5):  # older than the follow: at most 3 of them shown
            assert (
                fetch(stack.proxy, tokens["board"], "api", f"/echo/old-{index}").status_code == 200
            )
        follow = Follower([*command, "--interval", "1"], env)
        try:
            wait_for(partial(follow.printed, "/echo/old-4"), timeout=15, what="the first page")
            urls = [proxy.url for proxy in stack.proxies] + [workers.url]
            for index in range(12):  # a burst of 12, over 2 replicas and 2 workers
                path = f"/echo/burst-{index:02d}"
                reply = fetch(urls[index % len(urls)], tokens["board"], "api", path)
                assert reply.status_code == 200
            wait_for(partial(follow.printed, "/echo/burst-", 12), timeout=20, what="the burst")
            time.sleep(2.5)  # two more asks: nothing printed again
            follow.printed("")
        finally:
            said = follow.stop()
        burst = [line for line in follow.shown if "/echo/burst-" in line]
        assert sorted(line.split()[5] for line in burst) == [
            f"/echo/burst-{index:02d}" for index in range(12)
        ]
        assert sum("/echo/old-" in line for line in follow.shown) == 3  # --limit: first page only
        assert "not shown" not in said, said

        # More than a replica keeps (200 per connection) between two asks: said, and counted.
        follow = Follower([*command, "--interval", "25"], env)
        try:
            wait_for(partial(follow.printed, "/echo/burst-11"), timeout=15, what="the first page")
            started = time.monotonic()
            with httpx.Client(timeout=10) as client:
                for index in range(230):  # past the connection's quota too: refusals are kept
                    answer = client.get(
                        f"{stack.proxy}/v1/fetch/api/echo/flood-{index}",
                        headers={"Authorization": f"Bearer {tokens['board']}"},
                    )
                    assert answer.status_code in (200, 429), answer.text
            assert time.monotonic() - started < 20, "the flood outlasted the ask's interval"
            wait_for(partial(follow.printed, "/echo/flood-229"), timeout=40, what="the flood")
        finally:
            said = follow.stop()
        flood = [line for line in follow.shown if "/echo/flood-" in line]
        assert len(flood) == len({line.split()[5] for line in flood}) == 200
        assert "requests: 30 not shown: they ended since the last ask" in said, said
    finally:
        workers.server.stop()
        stack.local.servers.remove(workers.server)
