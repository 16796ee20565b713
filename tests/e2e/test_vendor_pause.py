"""A vendor's Retry-After through the whole stack (R4-1 and the grown suite's class 4): real
proxies, the operator and the API server, a real upstream on 127.0.0.1. Whatever the vendor
writes, the app gets the vendor's status, never a 500; a 12-digit value pauses the connection
for the cap and is told as that, one Event with a sane end; and the channel of the replica that
relayed it stays up, while another namespace's ConnectionTest on it ends with its real outcome
(it ended OutcomeUnknown when the operator's Event date overflowed and dropped the stream)."""

from __future__ import annotations

import datetime
import json
import re
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest

from gatehouse_contract.frames import MAX_PAUSE_SECONDS
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.resources import UNLIMITED_RATE
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    app_token,
    apply,
    connection,
    connection_test,
    data_app,
    fetch,
    finished,
    wait_condition,
)

pytestmark = pytest.mark.e2e

NO_AUTH: dict[str, Any] = {"type": "none"}


@pytest.fixture
def other_namespace(cluster: Cluster) -> Iterator[str]:
    name = f"gh-test-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _answers(url: str, token: str, alias: str) -> bool:
    return fetch(url, token, alias, "/echo/ready").status_code == 200


def _feeds(stack: Stack) -> list[dict[str, Any]]:
    return [
        httpx.get(f"{proxy.admin_url}/readyz", timeout=5).json()["feed"] for proxy in stack.proxies
    ]


def _dropped_frames(stack: Stack) -> list[str]:
    text = httpx.get(f"{stack.local.operator_metrics_url}/metrics", timeout=5).text
    return [
        line
        for line in text.splitlines()
        if line.startswith("gatehouse_operator_replica_frames_dropped_total{")
    ]


def _calls(stack: Stack, segment: str) -> int:
    return int(httpx.get(f"{stack.upstream}/_calls", timeout=5).json()["calls"].get(segment, 0))


def _throttled_events(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    found = cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector=reason=Throttled", "-o", "json"
    ).stdout
    events: list[dict[str, Any]] = json.loads(found)["items"]
    return events


def test_a_12_digit_retry_after_pauses_for_the_cap_and_drops_no_channel(
    cluster: Cluster, stack: Stack, namespace: str, other_namespace: str
) -> None:
    aliases = [f"vendor-{index}" for index in range(len(stack.proxies))]
    apply(
        cluster,
        namespace,
        *(connection(alias, stack.upstream, NO_AUTH, limits=UNLIMITED_RATE) for alias in aliases),
        connection("odd", stack.upstream, NO_AUTH, limits=UNLIMITED_RATE),
        data_app("sales", {alias: alias for alias in [*aliases, "odd"]}),
    )
    apply(
        cluster,
        other_namespace,
        connection("reports", stack.upstream, NO_AUTH, limits=UNLIMITED_RATE),
    )
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    wait_condition(cluster, other_namespace, "externalconnection/reports", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
    for proxy in stack.proxies:
        for alias in [*aliases, "odd"]:
            wait_for(partial(_answers, proxy.url, token, alias), timeout=20)

    # Outside the grammar: the vendor's own 429 reaches the app, and nothing is paused.
    for value in ("²", "①", "Fri, 31 Dec 99999999999999999999 23:59:59 GMT"):
        said = fetch(
            stack.proxy, token, "odd", "/status/429", params={"header": f"Retry-After:{value}"}
        )
        assert said.status_code == 429, (value, said.text)
        assert fetch(stack.proxy, token, "odd", "/echo/after").status_code == 200, value

    feeds_before, dropped_before = _feeds(stack), _dropped_frames(stack)
    assert all(feed["state"] == "connected" for feed in feeds_before)
    # Another tenant's test, running on a replica (whichever the operator picks) when the answers
    # come: each replica relays one, so the one running it is one that relayed.
    slow_calls = _calls(stack, "/slow")
    apply(cluster, other_namespace, connection_test("runs", "reports", path="/slow?seconds=4"))
    wait_for(lambda: _calls(stack, "/slow") > slow_calls, timeout=20, interval=0.1)
    for proxy, alias in zip(stack.proxies, aliases, strict=True):
        said = fetch(
            proxy.url, token, alias, "/status/429", params={"header": "Retry-After:999999999999"}
        )
        assert said.status_code == 429, said.text
        # The endpoint the vendor answered on is paused (R4-6: its other paths are not).
        then = fetch(proxy.url, token, alias, "/status/429")
        assert then.status_code == 429
        assert then.json()["error"]["code"] == "rate_limited"
        assert MAX_PAUSE_SECONDS - 5 <= int(then.headers["retry-after"]) <= MAX_PAUSE_SECONDS
    paused_at = datetime.datetime.now(datetime.UTC)

    test = finished(cluster, other_namespace, "runs")
    passed = next(c for c in test["status"]["conditions"] if c["type"] == "Passed")
    assert (passed["status"], passed["reason"]) == ("True", "Passed"), passed
    assert test["status"]["response"]["statusCode"] == 200

    # One Event a connection, its end the capped pause's.
    events = wait_for(
        lambda: (
            events if len(events := _throttled_events(cluster, namespace)) == len(aliases) else None
        ),
        timeout=20,
    )
    assert sorted(event["involvedObject"]["name"] for event in events) == aliases
    for event in events:
        assert "answered 429 with Retry-After 3600s" in event["message"], event["message"]
        until = re.search(r"until (\d\d:\d\d:\d\d) UTC", event["message"])
        assert until, event["message"]
        said_end = datetime.datetime.strptime(until[1], "%H:%M:%S").time()
        expected = (paused_at + datetime.timedelta(seconds=MAX_PAUSE_SECONDS)).time()
        drift = abs(
            datetime.datetime.combine(datetime.date.min, said_end)
            - datetime.datetime.combine(datetime.date.min, expected)
        )
        assert min(drift, datetime.timedelta(days=1) - drift) < datetime.timedelta(seconds=60)

    # No stream dropped: no replica reconnected or took a table again, no frame was dropped.
    feeds_after = _feeds(stack)
    assert [feed["snapshots"] for feed in feeds_after] == [
        feed["snapshots"] for feed in feeds_before
    ]
    assert all(feed["state"] == "connected" for feed in feeds_after)
    assert _dropped_frames(stack) == dropped_before
