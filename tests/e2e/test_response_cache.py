"""One vendor call for the whole fleet, end to end: connections with ``spec.cache`` compiled by the
operator, two proxy replicas of two workers sharing a real redis-server, and the stack's
upstream on 127.0.0.1, whose own count (``/_arrivals``) says how many requests reached it.

Identical concurrent misses across every worker make one upstream request; the answer is served
fresh, then revalidated with one conditional request; what may not be kept never is; apps never
see each other's answers; a fetcher whose replica is killed is taken over by a waiter on another
replica; the store stopped fails no fetch, and the cache comes back with it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    Fleet,
    app_token,
    apply,
    data_app,
    secret,
    started_fleet,
    wait_condition,
)

pytestmark = pytest.mark.e2e

SECRET = "sk_cache_e2e_never_in_an_answer"


@pytest.fixture(scope="module")
def fleet(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with started_fleet(stack.local, tmp_path_factory.mktemp("cache-store")) as fleet:
        yield fleet


def _cached(
    cluster: Cluster, stack: Stack, namespace: str, apps: list[str], **cache: Any
) -> dict[str, str]:
    """A connection to the upstream with an API key and ``cache``, linked by each of ``apps``
    under the alias ``api``; their tokens."""
    connection = {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "ExternalConnection",
        "metadata": {"name": "cached"},
        "spec": {
            "displayName": "Cached",
            "baseURL": stack.upstream,
            "linkPolicy": "Builders",
            "allowedMethods": ["GET", "POST"],
            "auth": API_KEY_AUTH,
            # Room for every request the tests make, the store away too (each worker then
            # counts its share of the limit alone).
            "limits": {"timeoutSeconds": 20, "requestsPerMinute": 10000},
            "cache": {"ttlSeconds": 60, "maxTTLSeconds": 600, **cache},
        },
    }
    apply(cluster, namespace, secret("vendor", **{"api-key": SECRET}), connection)
    apply(cluster, namespace, *(data_app(app, {"api": "cached"}) for app in apps))
    wait_condition(cluster, namespace, "externalconnection/cached", "True")
    for app in apps:
        wait_condition(cluster, namespace, f"dataapp/{app}", "True")
    return {app: app_token(cluster, namespace, f"dataapp-{app}-gatehouse") for app in apps}


def _arrived(stack: Stack, path: str, method: str = "GET") -> int:
    arrivals = httpx.get(f"{stack.upstream}/_arrivals", timeout=5).json()
    return int(arrivals.get(f"{method} {path}", 0))


async def _burst(
    urls: list[str], token: str, path: str, count: int, method: str = "GET"
) -> list[httpx.Response]:
    """``count`` requests at once, each on a new connection (the kernel spreads them over the
    replicas' workers), the replicas taken in turn."""
    limits = httpx.Limits(max_keepalive_connections=0, max_connections=count)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return list(
            await asyncio.gather(
                *(
                    client.request(
                        method,
                        f"{urls[n % len(urls)]}/v1/fetch/api{path}",
                        headers={"Authorization": f"Bearer {token}"},
                    )
                    for n in range(count)
                )
            )
        )


def _routed(fleet: Fleet, namespace: str) -> None:
    """Every replica of the fleet routes the namespace's connection (its table arrived)."""

    def routed() -> bool:
        return all(
            httpx.get(f"{url}/v1/fetch/api/", timeout=5).status_code == 401 for url in fleet.urls
        )

    wait_for(routed, timeout=20, interval=0.2, what="the fleet routing")


def test_200_identical_misses_across_the_fleet_make_one_upstream_request(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    tokens = _cached(cluster, stack, namespace, ["board", "other-board"])
    path = "/cacheable/orders?delay=0.5&header=Cache-Control:max-age%3D3"
    replies = asyncio.run(_burst(fleet.urls, tokens["board"], path, 200))
    assert {reply.status_code for reply in replies} == {200}, [r.text for r in replies[:3]]
    bodies = {reply.json()["id"] for reply in replies}
    assert len(bodies) == 1
    assert _arrived(stack, path) == 1
    statuses = {reply.headers["cache-status"].split(";")[1].strip() for reply in replies}
    assert statuses <= {"fwd=uri-miss", "hit"}, statuses
    # The echoed key was scrubbed before the answer was kept.
    assert {reply.json()["key"] for reply in replies} == {"[redacted]"}
    assert all(SECRET not in reply.text for reply in replies)
    # Within its max-age: no more requests, every replica answers from the one answer.
    again = asyncio.run(_burst(fleet.urls, tokens["board"], path, 20))
    assert {reply.json()["id"] for reply in again} == bodies
    assert all(reply.headers["cache-status"].startswith("gatehouse; hit") for reply in again)
    assert _arrived(stack, path) == 1
    # Another app (scope app, the default) has answers of its own.
    others = asyncio.run(_burst(fleet.urls, tokens["other-board"], path, 10))
    assert len({reply.json()["id"] for reply in others} | bodies) == 2
    assert _arrived(stack, path) == 2
    # Past its max-age: one conditional request, answered 304, renews it for everybody.
    time.sleep(3.2)
    renewed = asyncio.run(_burst(fleet.urls, tokens["board"], path, 30))
    assert {reply.json()["id"] for reply in renewed} == bodies
    assert _arrived(stack, path) == 3
    assert sum("fwd-status=304" in reply.headers["cache-status"] for reply in renewed) == 1


@pytest.mark.parametrize(
    ("method", "query"),
    [
        ("GET", "header=Cache-Control:no-store"),
        ("GET", "header=Cache-Control:private"),
        ("GET", "header=Set-Cookie:session%3D1"),
        ("POST", ""),
    ],
)
def test_what_may_not_be_kept_reaches_the_vendor_every_time(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet, method: str, query: str
) -> None:
    tokens = _cached(cluster, stack, namespace, ["board"])
    path = f"/cacheable/never-{method.lower()}" + (f"?{query}" if query else "")
    for _ in range(3):
        replies = asyncio.run(_burst(fleet.urls, tokens["board"], path, 4, method))
        assert {reply.status_code for reply in replies} == {200}
    assert _arrived(stack, path, method) == 12


def test_a_fetcher_whose_replica_is_killed_is_taken_over_and_no_waiter_fails(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    tokens = _cached(cluster, stack, namespace, ["board"])
    doomed = stack.local.start_proxy(workers=2, store=fleet.store)
    path = "/cacheable/slow?delay=2"
    try:
        _routed(Fleet(fleet.store, [*fleet.replicas, doomed]), namespace)
        first = httpx.AsyncClient(timeout=30)

        async def killed_then_waited() -> list[httpx.Response]:
            # The doomed replica's request takes the answer's lock and calls the vendor...
            fetching = asyncio.ensure_future(
                first.get(
                    f"{doomed.url}/v1/fetch/api{path}",
                    headers={"Authorization": f"Bearer {tokens['board']}"},
                )
            )
            await asyncio.sleep(0.5)
            waiting = asyncio.ensure_future(_burst(fleet.urls, tokens["board"], path, 40))
            await asyncio.sleep(0.5)
            # ...and its replica dies with the lock held: a waiter takes the fetch over.
            assert doomed.server.process is not None
            os.killpg(doomed.server.process.pid, signal.SIGKILL)
            with pytest.raises(httpx.HTTPError):
                await fetching
            return await waiting

        started = time.monotonic()
        replies = asyncio.run(killed_then_waited())
        asyncio.run(first.aclose())
        assert {reply.status_code for reply in replies} == {200}, [r.text for r in replies[:3]]
        assert len({reply.json()["id"] for reply in replies}) == 1
        assert _arrived(stack, path) == 2  # the dead fetcher's, and the one that took over
        print(f"40 waiters answered {time.monotonic() - started:.1f}s after the first request")
    finally:
        doomed.server.stop()
        stack.local.servers.remove(doomed.server)


def test_the_store_stopped_fails_no_fetch_and_the_cache_comes_back_with_it(
    cluster: Cluster, stack: Stack, namespace: str, fleet: Fleet
) -> None:
    tokens = _cached(cluster, stack, namespace, ["board"])
    path = "/cacheable/while-away"
    fleet.store.stop()
    try:
        replies = asyncio.run(_burst(fleet.urls, tokens["board"], path, 20))
        assert {reply.status_code for reply in replies} == {200}
        assert _arrived(stack, path) == 20  # uncached, uncoalesced
    finally:
        fleet.store.start()

    def cached_again() -> bool:
        before = _arrived(stack, path)
        asyncio.run(_burst(fleet.urls, tokens["board"], path, 4))
        return _arrived(stack, path) == before

    started = time.monotonic()
    wait_for(cached_again, timeout=30, interval=0.5, what="the fleet's cache back")
    print(f"the cache answered again {time.monotonic() - started:.1f}s after the store's return")
