"""A connection's quotas counted once for the fleet: two proxy replicas of two workers each,
sharing a real redis-server of their own (stopped and started here), the operator and the API
server. Counts are what the proxies answered and what the upstream received.

The three minute tests share one real minute: they run at once, on connections of their own.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.services import Endpoint
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    Fleet,
    app_token,
    apply,
    connection,
    data_app,
    project_members,
    started_fleet,
    wait_condition,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def fleet(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with started_fleet(stack.local, tmp_path_factory.mktemp("quota-store")) as fleet:
        yield fleet


def _calls(stack: Stack, segment: str) -> int:
    return int(httpx.get(f"{stack.upstream}/_calls", timeout=5).json()["calls"].get(segment, 0))


def _routed(
    cluster: Cluster, stack: Stack, namespace: str, name: str, apps: list[str], **limits: Any
) -> dict[str, str]:
    """A connection to the upstream with ``limits``, linked by each of ``apps``; their tokens."""
    apply(
        cluster,
        namespace,
        connection(name, stack.upstream, {"type": "none"}, limits=limits),
        *(data_app(app, {name: name}) for app in apps),
    )
    wait_condition(cluster, namespace, f"externalconnection/{name}", "True", "Routed")
    for app in apps:
        wait_condition(cluster, namespace, f"dataapp/{app}", "True", "Routed")
    return {app: app_token(cluster, namespace, f"dataapp-{app}-gatehouse") for app in apps}


async def _steady(
    urls: list[str], tokens: list[str], alias: str, count: int, seconds: float, *, fresh: bool
) -> list[int]:
    """``count`` fetches evenly over ``seconds``, taking the replicas and tokens in turn; each
    on a new connection (``fresh``: the kernel spreads them over the workers) or all on one
    kept-open connection to the first replica (one worker takes them all)."""
    statuses: list[int] = []
    limits = httpx.Limits(max_keepalive_connections=0 if fresh else 1, max_connections=64)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        pending = []

        async def one(index: int) -> None:
            url = urls[index % len(urls)] if fresh else urls[0]
            reply = await client.get(
                f"{url}/v1/fetch/{alias}/echo/quota",
                headers={"Authorization": f"Bearer {tokens[index % len(tokens)]}"},
            )
            statuses.append(reply.status_code)

        for index in range(count):
            await asyncio.sleep(max(started + index * seconds / count - loop.time(), 0))
            pending.append(asyncio.ensure_future(one(index)))
        await asyncio.gather(*pending)
    return statuses


def test_minute_limits_admit_100_per_minute_across_replicas_and_workers(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    per_app = _routed(cluster, stack, namespace, "even", ["even-app"], requestsPerMinute=100)
    skewed = _routed(cluster, stack, namespace, "skewed", ["skewed-app"], requestsPerMinute=100)
    three = _routed(
        cluster,
        stack,
        namespace,
        "shared",
        ["app-a", "app-b", "app-c"],
        requestsPerMinute=1000,
        connectionRequestsPerMinute=100,
    )

    async def one_minute() -> list[list[int]]:
        return list(
            await asyncio.gather(
                _steady(fleet.urls, list(per_app.values()), "even", 200, 58, fresh=True),
                _steady(fleet.urls, list(skewed.values()), "skewed", 200, 58, fresh=False),
                _steady(fleet.urls, list(three.values()), "shared", 200, 58, fresh=True),
            )
        )

    even, one_worker, across_apps = asyncio.run(one_minute())
    for statuses in (even, one_worker, across_apps):
        assert set(statuses) <= {200, 429}
    assert 98 <= even.count(200) <= 102, even.count(200)
    assert 98 <= one_worker.count(200) <= 102, one_worker.count(200)
    assert 98 <= across_apps.count(200) <= 102, across_apps.count(200)


def test_answers_and_refusals_say_where_the_app_stands(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    tokens = _routed(cluster, stack, namespace, "paced", ["app"], requestsPerMinute=3)
    headers = {"Authorization": f"Bearer {tokens['app']}"}
    answers = [
        httpx.get(f"{fleet.urls[i % 2]}/v1/fetch/paced/echo/x", headers=headers, timeout=10)
        for i in range(4)
    ]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
    assert [answer.headers["ratelimit-remaining"] for answer in answers] == ["2", "1", "0", "0"]
    assert all(answer.headers["ratelimit-limit"] == "3" for answer in answers)
    assert 1 <= int(answers[3].headers["retry-after"]) <= 61
    assert answers[3].json()["error"]["code"] == "rate_limited"


def test_a_daily_quota_survives_a_proxy_restart(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    tokens = _routed(cluster, stack, namespace, "daily", ["app"], requestsPerDay=5)
    headers = {"Authorization": f"Bearer {tokens['app']}"}
    fetch = "/v1/fetch/daily/echo/day"
    before = [httpx.get(url + fetch, headers=headers, timeout=10).status_code for url in fleet.urls]
    # A rollout: every replica replaced by a new process.
    for index, replica in enumerate(fleet.replicas):
        replica.server.stop()
        stack.local.servers.remove(replica.server)
        fleet.replicas[index] = stack.local.start_proxy(workers=2, store=fleet.store)
    for url in fleet.urls:
        wait_for(partial(_answers, url + fetch, headers), timeout=60, what="the new replicas")
    # _answers made one fetch each: 2 + 2 of 5, one more to go, then refusals.
    after = [httpx.get(fleet.urls[0] + fetch, headers=headers, timeout=10) for _ in range(3)]
    assert before == [200, 200]
    assert [answer.status_code for answer in after] == [200, 429, 429]
    assert "requests today (UTC)" in after[1].json()["error"]["message"]


def _answers(url: str, headers: dict[str, str]) -> bool:
    try:
        return httpx.get(url, headers=headers, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_vendors_429_with_retry_after_pauses_every_replica(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    # Every 429 of this API is the credential's limit, as its connection says: the whole
    # connection pauses (endpoints' own pauses are the next test's).
    tokens = _routed(
        cluster,
        stack,
        namespace,
        "vendor",
        ["app"],
        requestsPerMinute=100_000,
        credentialLimit={},
    )
    headers = {"Authorization": f"Bearer {tokens['app']}"}
    said = httpx.get(
        f"{fleet.urls[0]}/v1/fetch/vendor/status/429",
        params={"header": "Retry-After:30"},
        headers=headers,
        timeout=10,
    )
    paused_at = time.monotonic()
    assert said.status_code == 429  # the vendor's own answer reaches the app
    echoes = _calls(stack, "/echo")
    first_through = None
    refusals = 0
    while time.monotonic() - paused_at < 32:
        for url in fleet.urls:
            reply = httpx.get(f"{url}/v1/fetch/vendor/echo/paused", headers=headers, timeout=10)
            if reply.status_code == 200 and first_through is None:
                first_through = time.monotonic() - paused_at
            elif reply.status_code == 429:
                refusals += 1
                assert "asked to wait" in reply.json()["error"]["message"]
        if first_through is None:
            assert _calls(stack, "/echo") == echoes  # the vendor heard nothing meanwhile
        time.sleep(0.25)
    assert first_through is not None
    assert 29 <= first_through <= 31, first_through
    assert refusals > 100
    # Told once on the connection, not once per replica or per refusal.
    events = json.loads(
        cluster.kubectl(
            "get", "events", "-n", namespace, "--field-selector=reason=Throttled", "-o", "json"
        ).stdout
    )["items"]
    assert [event["involvedObject"]["name"] for event in events] == ["vendor"]
    assert "answered 429 with Retry-After 30s" in events[0]["message"]


def _events(cluster: Cluster, namespace: str, name: str) -> list[str]:
    found = json.loads(
        cluster.kubectl(
            "get", "events", "-n", namespace, "--field-selector=reason=Throttled", "-o", "json"
        ).stdout
    )["items"]
    return [event["message"] for event in found if event["involvedObject"]["name"] == name]


def _ask_to_wait(
    url: str, token: str, alias: str, *headers: str, status: int = 429
) -> httpx.Response:
    """The upstream answers ``status`` with each ``Name:value`` header (Retry-After, and
    others)."""
    return httpx.get(
        f"{url}/v1/fetch/{alias}/status/{status}",
        params=[("header", header) for header in headers],
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def _through(stack: Stack, fleet: Fleet, token: str, alias: str) -> list[int]:
    """Another app's fetch of another endpoint on each replica, and whether each reached the
    upstream (1) or not (0)."""
    reached = []
    for url in fleet.urls:
        before = _calls(stack, "/echo")
        reply = httpx.get(
            f"{url}/v1/fetch/{alias}/echo/elsewhere",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        reached.append((reply.status_code, _calls(stack, "/echo") - before))
    return [status if seen else -status for status, seen in reached]


def test_a_vendors_429_on_one_endpoint_pauses_that_endpoint_only(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    """R4-6: one app's request to an endpoint the vendor limits paused every app on the
    connection for up to an hour. Now the endpoint alone pauses, unless the connection says
    the answer is the credential's limit (a status on its paths, or a header that marks it)."""

    def routed(name: str, **limits: Any) -> dict[str, str]:
        apps = [f"noisy-{name}", f"other-{name}"]
        found = _routed(cluster, stack, namespace, name, apps, requestsPerMinute=100_000, **limits)
        return {app.partition("-")[0]: token for app, token in found.items()}

    # Not said: the endpoint pauses for every replica, the other paths go on.
    plain = routed("plain")
    said = _ask_to_wait(fleet.urls[0], plain["noisy"], "plain", "Retry-After:30")
    assert said.status_code == 429  # the vendor's own answer reaches the app
    assert _through(stack, fleet, plain["other"], "plain") == [200, 200]  # upstream reached
    for url in fleet.urls:
        again = _ask_to_wait(url, plain["other"], "plain", "Retry-After:30")
        assert again.json()["error"]["code"] == "rate_limited"
        assert "/status/429 on this connection is paused" in again.json()["error"]["message"]
        assert 28 <= int(again.headers["retry-after"]) <= 30

    declared = routed("declared", credentialLimit={"statuses": [429], "pathPrefixes": ["/status"]})
    marked = routed(
        "marked", credentialLimit={"header": {"name": "X-RateLimit-Scope", "value": "account"}}
    )

    # The connection says a 429 on /status is the credential's: everything pauses.
    said = _ask_to_wait(fleet.urls[0], declared["noisy"], "declared", "Retry-After:30")
    assert said.status_code == 429
    assert _through(stack, fleet, declared["other"], "declared") == [-429, -429]  # not reached

    # A header marks it: without it, the endpoint; with it (on another endpoint), everything.
    _ask_to_wait(fleet.urls[0], marked["noisy"], "marked", "Retry-After:30")
    assert _through(stack, fleet, marked["other"], "marked") == [200, 200]
    said = _ask_to_wait(
        fleet.urls[1],
        marked["noisy"],
        "marked",
        "Retry-After:20",
        "X-RateLimit-Scope:Account",
        status=503,
    )
    assert said.status_code == 503
    paused = httpx.get(
        f"{fleet.urls[0]}/v1/fetch/marked/echo/elsewhere",
        headers={"Authorization": f"Bearer {marked['other']}"},
        timeout=10,
    )
    assert paused.status_code == 429
    assert "paused for" in paused.json()["error"]["message"]
    assert "(the credential's limit)" in paused.json()["error"]["message"]

    # The Events and the connection's page say what is paused, until when and why.
    assert wait_for(lambda: len(_events(cluster, namespace, "marked")) == 2, timeout=10)
    (endpoint_only,) = _events(cluster, namespace, "plain")
    assert "answered 429 with Retry-After 30s on /status/429: no proxy replica calls" in (
        endpoint_only
    )
    assert "other paths are not paused" in endpoint_only
    (whole,) = _events(cluster, namespace, "declared")
    assert "answered 429 with Retry-After 30s on /status/429, the credential's limit" in whole
    assert "no proxy replica calls this connection until" in whole
    admin = project_members(cluster, namespace)["admin"].token
    api = stack.local.api_url
    detail = httpx.get(
        f"{api}/api/v1/namespaces/{namespace}/connections/marked",
        headers={"Authorization": f"Bearer {admin}"},
        timeout=10,
    ).json()
    assert [(p["scope"], p["endpoint"], p["status"]) for p in detail["paused"]] == [
        ("credential", "/status/503", 503),
        ("endpoint", "/status/429", 429),
    ]
    signed = httpx.post(
        f"{api}/ui/sign-in", data={"token": admin}, headers={"Origin": api}, timeout=10
    )
    cookie = signed.headers["set-cookie"].partition(";")[0]
    page = httpx.get(
        f"{api}/ui/namespaces/{namespace}/connections/plain", headers={"Cookie": cookie}, timeout=10
    ).text
    assert "<code>/status/429</code> only until" in page
    assert "the API answered 429 with Retry-After 30s" in page


def test_with_the_store_gone_each_worker_admits_its_share_and_counts_together_after(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    # 400 a minute: each of the 4 workers' share is 100, and the load below stays within it.
    tokens = _routed(cluster, stack, namespace, "steady", ["app"], requestsPerMinute=400)

    def counting(replica: Endpoint) -> str:
        ready = httpx.get(f"{replica.admin_url}/readyz", timeout=5).json()
        return str(ready["store"]["counting"])

    assert {counting(replica) for replica in fleet.replicas} == {"shared"}

    async def load(seconds: float) -> list[int]:
        return await _steady(
            fleet.urls, [tokens["app"]], "steady", int(seconds * 4), seconds, fresh=True
        )

    async def while_the_store_goes() -> tuple[list[int], float, float]:
        during = asyncio.ensure_future(load(8))
        await asyncio.sleep(1)
        fleet.store.stop()
        stopped = time.monotonic()
        alone = await asyncio.to_thread(
            wait_for,
            lambda: all(counting(replica) == "alone" for replica in fleet.replicas),
            timeout=10,
            interval=0.05,
            what="the replicas counting alone",
        )
        assert alone
        fell_back = time.monotonic() - stopped
        await asyncio.sleep(2)
        fleet.store.start()
        returned = time.monotonic()
        await asyncio.to_thread(
            wait_for,
            lambda: all(counting(replica) == "shared" for replica in fleet.replicas),
            timeout=10,
            interval=0.05,
            what="the replicas counting together",
        )
        back = time.monotonic() - returned
        return await during, fell_back, back

    statuses, fell_back, back = asyncio.run(while_the_store_goes())
    assert statuses == [200] * len(statuses)  # no failed fetch within the share
    assert fell_back <= 1.5, fell_back  # the readiness poll's own time on top of the second
    assert back <= 5, back
    metrics = httpx.get(f"{fleet.replicas[0].admin_url}/metrics", timeout=5).text
    assert "gatehouse_proxy_quota_counted_alone_total" in metrics


def test_a_wrong_store_password_is_said_not_a_crash_loop(
    stack: Stack, tmp_path: Path, fleet: Fleet
) -> None:
    wrong = RedisServer(tmp_path / "wrong", password="not-the-password", port=fleet.store.port)
    replica = stack.local.start_proxy(store=wrong)
    try:
        ready = httpx.get(f"{replica.admin_url}/readyz", timeout=5).json()
        assert ready["store"]["counting"] == "alone"
        assert "invalid username-password pair" in ready["store"]["lastError"]
        assert "not-the-password" not in json.dumps(ready)
        time.sleep(2)
        assert replica.server.process is not None
        assert replica.server.process.poll() is None  # still running, serving alone
    finally:
        replica.server.stop()
        stack.local.servers.remove(replica.server)
