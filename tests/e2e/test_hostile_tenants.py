"""One tenant's connection tests against everyone else's use of the operator and the replicas.

The operator is one process and one event loop for every namespace's admission, API, page and
tests; a replica is one loop for every tenant's fetches and tests. A test whose answer is 25 MiB
(the largest maxResponseBytes allows) once froze the operator for 80 s and took a replica past its
memory limit; a result too large for the table channel tore the replica's stream down; two dozen
slow tests of one tenant held every test place of every replica. The bounds asserted here are
loose (what failed before failed by orders of magnitude); make bench measures the figures.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    apply,
    connection,
    data_app,
    get,
    project_members,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

SECRET = "sk-hostile-0123456789abcdef"
LARGEST = 26_214_400  # the schema's maximum limits.maxResponseBytes


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


class Watch:
    """Asks cheap questions of each process every 20 ms while a test runs: the longest answer
    is how long its event loop was held; the highest RSS, what the test cost in memory."""

    def __init__(self, targets: dict[str, tuple[str, int]]) -> None:
        self.targets = targets  # name: (a /healthz that takes no turn, its process id)
        self.slowest = dict.fromkeys(targets, 0.0)
        self.baseline = {name: _rss_bytes(pid) for name, (_, pid) in targets.items()}
        self.peak = dict(self.baseline)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=120) as client:
            while not self._stop.wait(0.02):
                for name, (url, pid) in self.targets.items():
                    started = time.monotonic()
                    client.get(url)
                    self.slowest[name] = max(self.slowest[name], time.monotonic() - started)
                    self.peak[name] = max(self.peak[name], _rss_bytes(pid))

    def growth(self) -> dict[str, int]:
        return {name: self.peak[name] - self.baseline[name] for name in self.targets}

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=150)


def _watch(stack: Stack) -> Watch:
    targets = {"operator": (f"{stack.local.api_url}/healthz", stack.operator.server.pid)}
    for index, proxy in enumerate(stack.proxies):
        targets[f"proxy-{index}"] = (f"{proxy.url}/healthz", proxy.server.pid)
    return Watch(targets)


def _feeds(stack: Stack) -> list[dict[str, Any]]:
    return [
        httpx.get(f"{proxy.admin_url}/readyz", timeout=5).json()["feed"] for proxy in stack.proxies
    ]


def _test(name: str, target: str, path: str) -> dict[str, Any]:
    return {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "ConnectionTest",
        "metadata": {"name": name},
        "spec": {"connection": target, "path": path},
    }


def _finished(cluster: Cluster, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        body = get(cluster, namespace, f"connectiontest/{name}") or {}
        return body if body.get("status", {}).get("finishedAt") else None

    found: dict[str, Any] = wait_for(
        done, timeout=timeout, interval=0.2, what=f"ConnectionTest {name}"
    )
    return found


@pytest.fixture
def other_namespace(cluster: Cluster) -> Iterator[str]:
    name = f"gh-test-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_a_25_mib_answer_costs_the_operator_and_its_replica_little(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("huge-credential", token=SECRET))
    auth = {"type": "bearer", "secretRef": {"name": "huge-credential", "key": "token"}}
    limits = {"maxResponseBytes": LARGEST, "timeoutSeconds": 120}
    apply(cluster, namespace, connection("huge", stack.upstream, auth, limits=limits))
    wait_condition(cluster, namespace, "externalconnection/huge", "True")
    feeds = _feeds(stack)
    fills = ("strings", "percent", "control")
    with _watch(stack) as watch:
        for fill in fills:
            apply(cluster, namespace, _test(fill, "huge", f"/big?bytes={LARGEST}&fill={fill}"))
        results = [_finished(cluster, namespace, fill, timeout=120)["status"] for fill in fills]
        # The same answer through Test this draft, the service API's path.
        members = project_members(cluster, namespace)
        draft = httpx.post(
            f"{stack.local.api_url}/api/v1/namespaces/{namespace}/connection-drafts/tests",
            json={
                "name": "huge",
                "spec": {**connection("huge", stack.upstream, auth, limits=limits)["spec"]},
                "secret": SECRET,
                "request": {"method": "GET", "path": f"/big?bytes={LARGEST}&fill=strings"},
                "replaces": True,
            },
            headers=members["admin"].headers(),
            timeout=150,
        )
    for status in results:
        assert status["conditions"][0]["status"] == "True", status
        response = status["response"]
        assert (response["sizeBytes"], response["truncated"]) == (LARGEST, True)
        assert len(response["body"]) <= 4_000
        assert status["sampleBody"]["truncated"] is True
    assert draft.status_code == 200, draft.text
    assert draft.json()["passed"] is True
    assert draft.json()["response"]["sizeBytes"] == LARGEST
    print("longest answer (s):", watch.slowest, "RSS growth (bytes):", watch.growth())
    # Before: 16.5 s for a 5 MiB answer, ~80 s for 25 MiB; replica RSS +230 MiB to +1.3 GiB.
    assert max(watch.slowest.values()) < 1.0, watch.slowest
    assert max(watch.growth().values()) < 20 * 1024 * 1024, watch.growth()
    # Every result fitted the channel: no replica lost its stream and asked for a snapshot.
    assert [feed["snapshots"] for feed in _feeds(stack)] == [feed["snapshots"] for feed in feeds]


def test_a_tenant_flooding_slow_tests_leaves_another_tenants_tests_and_writes_alone(
    cluster: Cluster, stack: Stack, namespace: str, other_namespace: str
) -> None:
    flooder, other = namespace, other_namespace
    limits = {"timeoutSeconds": 20}
    apply(cluster, flooder, connection("slow", stack.upstream, {"type": "none"}, limits=limits))
    apply(cluster, other, connection("quick", stack.upstream, {"type": "none"}))
    wait_condition(cluster, flooder, "externalconnection/slow", "True")
    wait_condition(cluster, other, "externalconnection/quick", "True")
    flood = [_test(f"slow-{n}", "slow", "/slow?seconds=10") for n in range(24)]
    apply(cluster, flooder, *flood)
    time.sleep(1)  # the flood has reached the replicas

    started = time.monotonic()
    apply(cluster, other, _test("quick", "quick", "/echo/ping"))
    quick = _finished(cluster, other, "quick", timeout=60)
    waited = time.monotonic() - started
    apply(cluster, other, data_app("app", {"api": "quick"}))
    written = time.monotonic() - started - waited
    print(f"the other tenant's test: {waited:.2f} s; its DataApp write: {written:.2f} s")
    assert quick["status"]["conditions"][0]["status"] == "True", quick["status"]
    # Before: 10 s, behind the flood on every place of both replicas.
    assert waited < 3, waited
    assert written < 3, written

    # The flood itself is not lost: tests past the namespace's places wait and then run.
    for test in flood:
        status = _finished(cluster, flooder, test["metadata"]["name"], timeout=120)["status"]
        assert status["conditions"][0]["status"] == "True", status
    assert json.loads(quick["status"]["response"]["body"])["path"] == "/echo/ping"


def _post_until_answered(api: str, path: str, token: str, *, declared: int | None) -> int:
    """Posts a body of ``declared`` bytes (None: chunked, endless) until the server answers;
    its status. The body is sent for at most 256 MiB or 20 s, whichever comes first."""
    host, port = api.removeprefix("http://").split(":")
    framing = f"Content-Length: {declared}" if declared else "Transfer-Encoding: chunked"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    )
    piece = b"[" + b"1," * 32_767 + b"1]"
    if declared is None:
        piece = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    answer = b""
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(head.encode())
        sent, deadline = 0, time.monotonic() + 20
        while sent < 256 * 1024 * 1024 and time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock], [], 1)
            if readable:
                break
            if writable:
                try:
                    sent += sock.send(piece)
                except OSError:
                    break  # closed after its answer: read it below
        sock.settimeout(10)
        while b"\r\n" not in answer:
            received = sock.recv(4096)
            if not received:
                break
            answer += received
    return int(answer.split(b" ", 2)[1])


def test_a_large_post_costs_the_operator_nothing_before_its_caller_is_allowed(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """Bodies are read only once the caller may do what they ask, and only up to what the API
    takes. Before, the whole body was read first: 1 GiB from a token without any right took
    the operator from 236 MiB to 2.2 GiB (past the chart's limit: every tenant's admission
    went down with it)."""
    members = project_members(cluster, namespace)
    prefix = f"/api/v1/namespaces/{namespace}"
    posts = [
        f"{prefix}/connection-drafts/tests",
        f"{prefix}/connections/any/tests",
        f"{prefix}/connectiontests/any/sample",
    ]
    operator = stack.operator.server.pid
    before = _rss_bytes(operator)
    peak = before
    for path in posts:
        for declared in (1024**3, None):
            for who, expected in (("nobody", 403), ("admin", 413)):
                if who == "admin" and "connection-drafts" not in path:
                    continue  # the others need a connection or a test to exist first
                token = members[who].token
                status = _post_until_answered(stack.local.api_url, path, token, declared=declared)
                assert status == expected, (path, declared, who, status)
                peak = max(peak, _rss_bytes(operator))
    # No token at all, and a token the API server does not know: refused before the body too.
    for token in ("", "not-a-token"):
        status = _post_until_answered(stack.local.api_url, posts[0], token, declared=None)
        assert status == 401
    print(f"operator RSS {before / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB")
    assert peak - before < 10 * 1024 * 1024, (before, peak)


def test_trickled_heads_are_cut_off_and_the_channel_port_tells_strangers_nothing(
    stack: Stack,
) -> None:
    """The API's port gives each request head 10 s (it held 500 trickled heads for 60 s and
    more before); the table channel's port, which anyone on the network reaches, answers its
    health check without naming replicas, versions or keys."""
    host, port = stack.local.api_url.removeprefix("http://").split(":")
    trickling = [socket.create_connection((host, int(port)), timeout=5) for _ in range(50)]
    started = time.monotonic()
    try:
        for sock in trickling:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        open_ = list(trickling)
        while open_ and time.monotonic() - started < 20:
            for sock in list(open_):
                try:
                    sock.sendall(b"X: y\r\n")
                except OSError:
                    open_.remove(sock)
            assert httpx.get(f"{stack.local.api_url}/healthz", timeout=5).status_code == 200
            time.sleep(0.5)
        held = time.monotonic() - started
    finally:
        for sock in trickling:
            sock.close()
    assert not open_, f"{len(open_)} trickled heads still open after {held:.0f} s"
    assert held < 15, held
    health = httpx.get(f"{stack.local.operator_url}/healthz", verify=False, timeout=5)  # noqa: S501
    assert health.json() == {"ok": True}
