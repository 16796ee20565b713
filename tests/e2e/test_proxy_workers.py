"""``--workers 2``: two proxy processes on one port, each a replica of the table, spoken for by
one readiness and one metrics answer; a worker that dies is started again, and none outlives the
supervisor."""

from __future__ import annotations

import errno
import os
import signal
import socket

import httpx
import pytest

from gatehouse_dev.bench_workers import served_by_worker
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import alive, children
from gatehouse_dev.resources import UNLIMITED_RATE
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    connection,
    data_app,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e


def _workers(supervisor: int) -> list[int]:
    return sorted(children(supervisor))


def _ready(admin_url: str) -> bool:
    answer = httpx.get(f"{admin_url}/readyz", timeout=5)
    return answer.status_code == 200 and len(answer.json()["workers"]) == 2


def test_two_workers_share_the_port_and_a_dead_one_is_replaced(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": "k-workers"}))
    # Each worker keeps its own rate buckets: the test's burst must not meet them.
    apply(
        cluster,
        namespace,
        connection("vendor", stack.upstream, API_KEY_AUTH, limits=UNLIMITED_RATE),
    )
    apply(cluster, namespace, data_app("sales", {"vendor": "vendor"}))
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
    proxy = stack.local.start_proxy(workers=2)
    supervisor = proxy.server.pid
    try:
        wait_for(lambda: _ready(proxy.admin_url), timeout=20)
        ready = httpx.get(f"{proxy.admin_url}/readyz", timeout=5).json()
        assert [worker["worker"] for worker in ready["workers"]] == [0, 1]
        assert ready["encryptedWith"]
        assert ready["tableVersion"] >= 1

        def fetch_all(count: int) -> list[int]:
            # A new connection each, so that the kernel spreads them over the workers.
            headers = {"Authorization": f"Bearer {token}", "Connection": "close"}
            url = f"{proxy.url}/v1/fetch/vendor/echo/"
            return [httpx.get(url, headers=headers, timeout=10).status_code for _ in range(count)]

        assert set(fetch_all(60)) == {200}
        served = served_by_worker(proxy.admin_url)
        assert set(served) == {"0", "1"}, served
        assert min(served.values()) > 0, served
        _no_one_else_binds_the_port(proxy.url)

        first, second = _workers(supervisor)
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: first not in _workers(supervisor) and len(_workers(supervisor)) == 2, 10)
        wait_for(lambda: _ready(proxy.admin_url), timeout=20)
        assert second in _workers(supervisor)
        assert set(fetch_all(20)) == {200}
    finally:
        workers = _workers(supervisor) if alive(supervisor) else []
        proxy.server.stop()
    # SIGTERM to the supervisor ends every worker, as a Pod's stop does.
    wait_for(lambda: not any(alive(pid) for pid in workers), timeout=15)


def _no_one_else_binds_the_port(url: str) -> None:
    """Another process of the same user cannot bind the app port, even with SO_REUSEPORT, and so
    cannot take a share of the apps' connections and their tokens (before: 14 of 30)."""
    host, _, port = url.removeprefix("http://").rpartition(":")
    with socket.socket() as thief:
        thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        with pytest.raises(OSError, match="in use") as refused:
            thief.bind((host, int(port)))
        assert refused.value.errno == errno.EADDRINUSE
