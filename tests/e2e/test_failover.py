"""Two elected operators: when the leader stops, the standby takes over and the proxies follow.

Fetches run through both proxies the whole time (they keep serving their last table while no
operator answers); a connection applied after the leader stopped is routed by the new one.
The same on the node, with Pods deleted and evicted, is tests/node's fault suite.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.resources import UNLIMITED_RATE
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    condition,
    connection,
    data_app,
    fetch,
    get,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e


class Load:
    """Fetches through every proxy, one after another, until stopped; counts what failed."""

    def __init__(self, proxies: list[str], token: str) -> None:
        self.proxies, self.token = proxies, token
        self.sent = 0
        self.failed: list[str] = []
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.finished.is_set():
            for proxy in self.proxies:
                try:
                    status = fetch(proxy, self.token, "vendor", "/echo/").status_code
                except httpx.HTTPError as error:
                    self.failed.append(type(error).__name__)
                else:
                    if status != 200:
                        self.failed.append(str(status))
                self.sent += 1
            time.sleep(0.02)

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.finished.set()
        self.thread.join(timeout=30)


def test_the_standby_takes_over_when_the_leader_stops(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    standby = stack.local.start_operator(standby=True)
    apply(cluster, namespace, secret("vendor", **{"api-key": "k-failover"}))
    unlimited = connection("vendor", stack.upstream, API_KEY_AUTH, limits=UNLIMITED_RATE)
    apply(cluster, namespace, unlimited)
    apply(cluster, namespace, data_app("sales", {"vendor": "vendor"}))
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
    with Load([proxy.url for proxy in stack.proxies], token) as load:
        time.sleep(1)
        stopped = time.monotonic()
        # SIGTERM, as a deleted Pod gets (it releases the Lease), not waiting for it to exit.
        leader = stack.operator
        os.kill(leader.server.pid, signal.SIGTERM)
        stack.operator = standby
        apply(cluster, namespace, connection("later", stack.upstream, {"type": "none"}))
        apply(cluster, namespace, data_app("later", {"vendor": "later"}))
        later = app_token(cluster, namespace, "dataapp-later-gatehouse")

        def routed() -> bool:
            return all(
                fetch(proxy.url, later, "vendor", "/echo/").status_code == 200
                for proxy in stack.proxies
            )

        wait_for(routed, timeout=30, interval=0.1, what="a new connection, routed by the standby")
        took = time.monotonic() - stopped
        time.sleep(1)
    leader.server.stop()
    print(f"failover: {took:.1f}s to route a new connection, {load.sent} fetches, 0 failed")
    assert load.sent > 50
    assert load.failed == []
    # The standby's cold start (kopf lists everything, the first table) included.
    assert took < 5, took
    ready = httpx.get(f"{stack.proxies[0].admin_url}/readyz", timeout=5).json()
    assert ready["feed"]["state"] == "connected", ready


def test_a_test_in_flight_when_the_leader_stops_is_not_sent_again(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """The new leader finds a ConnectionTest the old one sent and never saw the end of: it may
    have reached the upstream, so it fails as OutcomeUnknown instead of being sent again
    (before: the new leader ran it again, and a POST arrived twice)."""
    standby = stack.local.start_operator(standby=True)
    limits = {"timeoutSeconds": 12}
    apply(
        cluster,
        namespace,
        connection(
            "vendor", stack.upstream, {"type": "none"}, allowedMethods=["POST"], limits=limits
        ),
    )
    wait_condition(cluster, namespace, "externalconnection/vendor", "True")
    path = f"/slow?seconds=8&charge={namespace}"
    test = {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "ConnectionTest",
        "metadata": {"name": "charge"},
        "spec": {"connection": "vendor", "method": "POST", "path": path, "body": {"cents": 1}},
    }
    apply(cluster, namespace, test)

    def arrived() -> int:
        return int(
            httpx.get(f"{stack.upstream}/_arrivals", timeout=5).json().get(f"POST {path}", 0)
        )

    wait_for(lambda: arrived() == 1, timeout=20, interval=0.1, what="the POST at the upstream")
    leader = stack.operator
    os.kill(leader.server.pid, signal.SIGTERM)
    stack.operator = standby
    done = wait_for(
        lambda: (
            (get(cluster, namespace, "connectiontest/charge") or {})
            .get("status", {})
            .get("finishedAt")
        ),
        timeout=40,
        interval=0.2,
        what="the test finished by the new leader",
    )
    assert done
    passed = condition(cluster, namespace, "connectiontest/charge", "Passed")
    leader.server.stop()
    time.sleep(1)
    assert arrived() == 1
    assert passed["reason"] == "OutcomeUnknown", passed
    assert "not sent again" in passed["message"]
