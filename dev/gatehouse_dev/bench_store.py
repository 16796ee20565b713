"""What counting quotas in the shared store costs a fetch, and how exact the counts are.

Cost: three proxies beside each other: one counting each request's quotas in the store (a real
redis-server) as shipped (a hot connection's permits in leases), one asking the store for every
request (leases off: one round trip a request, pipelined per turn of the event loop), and one
counting alone as with no store; the same nginx upstream; wrk through each in turn, ROUNDS times
(each round in another order), at 1 and 32 connections, the requests spread over four apps,
with the proxy's CPU time a request.
Accuracy: a limit of 100 a minute, twice as many requests sent evenly over a minute, through two
proxies of two workers each sharing the store: spread over the workers, all to one worker, and
over three apps against the connection's own limit.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import yaml

from gatehouse_contract.routes import ConnectionRoute, Credential, Limits
from gatehouse_dev import nginx, resources
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import cpu_seconds
from gatehouse_dev.redis_server import RedisServer
from gatehouse_dev.services import LocalGatehouse
from gatehouse_dev.waiting import wait_for
from gatehouse_proxy.limits.quotas import Quotas
from gatehouse_proxy.store.shared_store import StoreSettings, opened

ROUNDS = 5
ROUND_SECONDS = 4
ALONE = "store off (each worker counts alone)"
SHARED = "store on (leases on a hot connection, as shipped)"
EXACT = "store on, leases off (a round trip a request)"
LABELS = (ALONE, SHARED, EXACT)
APPS = 4

Wrk = Callable[..., dict[str, float]]


def _namespace(cluster: Cluster, documents: list[dict[str, Any]]) -> str:
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump_all(documents))
    return namespace


def _routed(proxy: str, token: str, alias: str, path: str = "/items") -> None:
    url = f"{proxy}/v1/fetch/{alias}{path}"
    headers = {"Authorization": f"Bearer {token}"}
    wait_for(
        lambda: httpx.get(url, headers=headers, timeout=5).status_code == 200,
        timeout=30,
        what=f"{alias} routed through {proxy}",
    )


def cost(
    cluster: Cluster, local: LocalGatehouse, wrk: Wrk
) -> dict[tuple[str, int], dict[str, float]]:
    upstream = local.start_nginx("nginx-upstream", nginx.upstream_config).url
    local.start_store()
    local.start_operator()
    proxies = {
        ALONE: local.start_proxy(store=False),
        SHARED: local.start_proxy(),
        EXACT: local.start_proxy(settings={"GATEHOUSE_QUOTA_LEASE_SHARE": "0"}),
    }
    # A limit no load here reaches, even as the share a worker counting alone keeps (each
    # limit over the three proxies), so every request is counted and none refused (checked
    # below: a refusal is cheaper than a fetch, and flattered the row counting alone before).
    # The schema's largest per-app limit is 100,000 a minute: the load is spread over APPS apps.
    limits = {"requestsPerMinute": 100_000, "connectionRequestsPerMinute": 1_000_000}
    namespace = _namespace(
        cluster,
        [
            resources.connection("api", upstream, {"type": "none"}, limits=limits),
            *(resources.data_app(f"bench{index}", {"api": "api"}) for index in range(APPS)),
        ],
    )
    authorizations = tuple(
        "Bearer " + cluster.app_token(namespace, f"dataapp-bench{index}-gatehouse", timeout=30)
        for index in range(APPS)
    )
    for proxy in proxies.values():
        for authorization in authorizations:
            _routed(proxy.url, authorization.removeprefix("Bearer "), "api")
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for round_ in range(ROUNDS):
        for connections in (1, 32):
            # Each round starts with another proxy, so none always runs first or right after
            # the same one (an order the machine's state would otherwise be measured with).
            turn = round_ % len(LABELS)
            for label in LABELS[turn:] + LABELS[:turn]:
                proxy = proxies[label]
                url = f"{proxy.url}/v1/fetch/api/items"
                pid = proxy.server.pid
                before = cpu_seconds(pid)
                result = wrk(
                    url, connections, {}, seconds=ROUND_SECONDS, authorizations=authorizations
                )
                if result["non_2xx"]:
                    raise RuntimeError(f"{label}: {result['non_2xx']:.0f} answers were not 200")
                used = cpu_seconds(pid) - before
                result["cpu_us"] = used / (result["rps"] * ROUND_SECONDS) * 1e6
                runs.setdefault((label, connections), []).append(result)
    return {
        key: {figure: statistics.median(run[figure] for run in measured) for figure in measured[0]}
        for key, measured in runs.items()
    }


# The quota step alone, in one process: as many requests as a worker counting alone admits of the
# bench's limit within a minute (its share, the limit over three workers).
STEP_REQUESTS = 30_000


def quota_step(store: RedisServer) -> dict[str, float]:
    """µs a request of ``Quotas.admit`` alone (no HTTP): counted alone, and with the store (its
    leases; the store's round trips for them included), the best of three runs each."""
    limits = Limits(
        timeout_seconds=30,
        max_request_bytes=1024,
        max_response_bytes=1024,
        requests_per_minute=100_000,
        connection_requests_per_minute=1_000_000,
    )

    async def run(shared: bool) -> float:
        best = float("inf")
        settings = StoreSettings(store.url, store.password) if shared else None
        async with opened(settings) as client:
            for attempt in range(3):
                # A connection of its own each run: counts start afresh, as in a new minute.
                route = ConnectionRoute(
                    key=f"bench/step{attempt}",
                    uid=uuid.uuid4().hex,
                    origin="http://127.0.0.1",
                    allowed_methods=frozenset({"GET"}),
                    allowed_paths=("/",),
                    credential=Credential(type="none"),
                    limits=limits,
                )
                quotas = Quotas(client, lambda: 3)
                started = time.perf_counter()
                for _ in range(STEP_REQUESTS):
                    await quotas.admit(route, "app")
                best = min(best, (time.perf_counter() - started) / STEP_REQUESTS * 1e6)
        return best

    return {ALONE: asyncio.run(run(False)), SHARED: asyncio.run(run(True))}


def accuracy(cluster: Cluster, local: LocalGatehouse) -> dict[str, int]:
    """Admitted of 200 sent evenly over a minute, for each of the three spreads."""
    upstream = local.start_upstream().url
    if local.store is None:
        local.start_store()
    proxies = [local.start_proxy(workers=2) for _ in range(2)]
    namespace = _namespace(
        cluster,
        [
            resources.connection(
                "even", upstream, {"type": "none"}, limits={"requestsPerMinute": 100}
            ),
            resources.connection(
                "skewed", upstream, {"type": "none"}, limits={"requestsPerMinute": 100}
            ),
            resources.connection(
                "shared",
                upstream,
                {"type": "none"},
                limits={"requestsPerMinute": 1000, "connectionRequestsPerMinute": 100},
            ),
            resources.data_app("a", {"even": "even", "skewed": "skewed", "shared": "shared"}),
            resources.data_app("b", {"shared": "shared"}),
            resources.data_app("c", {"shared": "shared"}),
        ],
    )
    tokens = [cluster.app_token(namespace, f"dataapp-{app}-gatehouse", timeout=30) for app in "abc"]
    for alias in ("even", "skewed", "shared"):
        for proxy in proxies:
            _routed(proxy.url, tokens[0], alias, path="/echo/")
    # The routing checks above were counted: start each limit afresh.
    assert local.store is not None
    with local.store.client() as client:
        client.flushall()
    urls = [proxy.url for proxy in proxies]

    async def minute() -> list[int]:
        return list(
            await asyncio.gather(
                _admitted(urls, tokens[:1], "even", fresh=True),
                _admitted(urls, tokens[:1], "skewed", fresh=False),
                _admitted(urls, tokens, "shared", fresh=True),
            )
        )

    even, skewed, shared = asyncio.run(minute())
    return {
        "spread over 2 replicas x 2 workers": even,
        "all to one worker": skewed,
        "3 apps, the connection's limit": shared,
    }


async def _admitted(urls: list[str], tokens: list[str], alias: str, *, fresh: bool) -> int:
    count, seconds = 200, 58.0
    limits = httpx.Limits(max_keepalive_connections=0 if fresh else 1, max_connections=64)
    admitted = 0
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def one(index: int) -> int:
            reply = await client.get(
                f"{urls[index % len(urls) if fresh else 0]}/v1/fetch/{alias}/echo/",
                headers={"Authorization": f"Bearer {tokens[index % len(tokens)]}"},
            )
            return int(reply.status_code == 200)

        pending = []
        for index in range(count):
            await asyncio.sleep(max(started + index * seconds / count - loop.time(), 0))
            pending.append(asyncio.ensure_future(one(index)))
        admitted = sum(await asyncio.gather(*pending))
    return admitted


def table(
    results: dict[tuple[str, int], dict[str, float]],
    admitted: dict[str, int],
    step: dict[str, float],
) -> str:
    lines = [
        "| quotas | connections | req/s | p50 ms | p99 ms | req/s vs store off | p50 added ms "
        "| proxy CPU µs a request |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (label, connections), result in sorted(
        results.items(), key=lambda item: (item[0][1], LABELS.index(item[0][0]))
    ):
        alone = results[(ALONE, connections)]
        lines.append(
            f"| {label} | {connections} | {result['rps']:,.0f} | {result['p50']:.2f} "
            f"| {result['p99']:.2f} | {result['rps'] / alone['rps']:.2f} "
            f"| {result['p50'] - alone['p50']:.2f} | {result['cpu_us']:.0f} |"
        )
    lines += [
        "",
        f"| the quota step alone, in one process ({STEP_REQUESTS:,} requests) | µs a request |",
        "|---|---|",
        *(f"| {label} | {us:.1f} |" for label, us in step.items()),
        "",
        "| a limit of 100 a minute, 200 sent evenly over a minute | admitted |",
        "|---|---|",
        *(f"| {spread} | {count} |" for spread, count in admitted.items()),
    ]
    return "\n".join(lines)
