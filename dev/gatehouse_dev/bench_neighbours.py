"""Noisy neighbours: tenant B's latency through one proxy replica while tenant A attacks it.

Both tenants are namespaces on the same replica (a real operator and proxy process), each with
its own upstream, as two vendors would be. B's app makes ordinary requests (wrk, 4 connections
with 5 ms between an answer and the next request, about 600 a second, an API key injected): a
busy tenant on a replica with headroom, as an autoscaled deployment runs. B as fast as wrk can
go would measure the replica's capacity instead: at saturation every request of anyone's takes
CPU from B's. Meanwhile A's app runs one attack at a time, each as a namespace admin could
mount it within the limits Gatehouse enforces, and retrying a 503 after its ``Retry-After``:

1. Google key files: a 4,096-bit key (the largest accepted) whose every exchange fails, 200
   requests a second.
2. A 4 KiB API key (the longest accepted), echoed back in every answer so that every body is
   scrubbed, 200 requests a second.
3. Slow upstreams: 300 requests at a time to an upstream that answers after 5 s.
4. Large bodies: 30 uploads of 10 MiB at a time (the largest a connection may allow).
5. The same uploads, each refusal retried at once: a flood.

6. Connection tests (a second table): 8 callers running tests through the service API and 4
   drafting, each of an answer of 25 MiB (the largest maxResponseBytes allows) of short JSON
   strings, one after another, while B fetches, runs a test of its own and edits its DataApp
   (the admission webhook) every half second.

Attacks 1 and 2 are paced at 200 requests a second, and attacks 3 and 4 by the refusals'
``Retry-After``: their point is what each request costs, and a flood of any request costs CPU,
which one process shares; attack 5 shows how much (see docs/security/guarantees.md, "Security:
what is guaranteed, and where it stops", which has this benchmark's table).

A's load generator and A's upstream run in the scheduler's idle class (``SCHED_IDLE``: they get
the CPU no other process wants, and yield it the moment another wakes). They stand in for Pods
elsewhere, or at least under CPU requests of their own: on this one VM they would otherwise take
the replica's and B's cores, which no tenant can do to a replica in a cluster. Nice 19 is not
enough for that: a nice process keeps the core for up to a time slice after B's wrk wakes.

The table gives B's p50 and p99 during each attack and their ratio to B's quiet p99, what A's
requests got, and the replica's peak memory. As a control, each attack runs a second time against
another replica on the same VM while B is measured again: that p99 is what the attack costs B
through the machine (CPU, the loopback network) alone, and the last ratio is what sharing the
replica adds to it.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import aiohttp
import httpx
from kubernetes import client, config

from gatehouse_dev import bench_scale
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import cpu_seconds, rss_mb
from gatehouse_dev.resources import (
    NO_AUTH,
    UNLIMITED_RATE,
    api_key_auth,
    connection,
    data_app,
    secret,
)
from gatehouse_dev.service_accounts import service_account_key
from gatehouse_dev.services import Endpoint, LocalGatehouse
from gatehouse_dev.waiting import wait_for

Wrk = Callable[[str, int, dict[str, str], int], dict[str, float]]

QUIET, NOISY = "tenant-b", "tenant-a"
LARGEST_ANSWER = 26_214_400  # the largest limits.maxResponseBytes
HUGE_PATH = f"/big?bytes={LARGEST_ANSWER}&fill=strings"
HUGE_SECRET = "sk-huge-0123456789"  # noqa: S105 (a bench's made-up credential)
_HUGE_AUTH = {"type": "bearer", "secretRef": {"name": "huge", "key": "token"}}
_HUGE_LIMITS = {**UNLIMITED_RATE, "maxResponseBytes": LARGEST_ANSWER, "timeoutSeconds": 60}
PAUSE_MS = 5  # B's requests: about 600 a second, a busy tenant on a replica with headroom
LONG_SECRET = "k" * 4096
BODY = b"x" * (10 * 1024 * 1024)


@dataclass(frozen=True)
class Attack:
    label: str
    alias: str
    path: str
    workers: int
    per_second: float = 0  # 0: as fast as the answers come
    method: str = "GET"
    body: bytes = b""
    retry_after: bool = True  # a 503's Retry-After is waited out


ATTACKS = [
    Attack(
        "1. Google key file, 4,096 bits, exchanges failing (200/s)", "google", "/echo/", 32, 200
    ),
    Attack("2. 4 KiB API key echoed in every answer (200/s)", "long", "/echo/", 32, 200),
    Attack("3. slow upstream (5 s answers), 300 at a time", "slow", "/slow?seconds=5", 300),
    Attack(
        "4. 10 MiB request bodies, 30 at a time", "bodies", "/slow?seconds=1", 30, 0, "POST", BODY
    ),
    Attack(
        "5. as 4, refusals retried at once (a flood)",
        "bodies",
        "/slow?seconds=1",
        30,
        0,
        "POST",
        BODY,
        retry_after=False,
    ),
]


@dataclass
class FloodRow:
    """Tenant A floods connection tests; what B's fetches, tests and writes took meanwhile."""

    fetch: dict[str, float]
    test_seconds: list[float]
    write_seconds: list[float]
    outcomes: Counter[str]
    operator_mb: float
    proxy_mb: float
    cpu_seconds: dict[str, float]  # of each process of ours, over the flood
    seconds: float


@dataclass
class Row:
    label: str
    p50: float
    p99: float
    outcomes: Counter[str]
    proxy_mb: float
    apart_p99: float  # B's p99 while A attacks another replica


def _tenants(upstream: str, quiet_upstream: str) -> dict[str, list[dict[str, Any]]]:
    key_file, _ = service_account_key(
        "stranger@gatehouse-bench.iam.gserviceaccount.com", key_size=4096
    )
    noisy = [
        secret("google", **{"key.json": key_file.decode()}),
        connection(
            "google",
            upstream,
            {
                "type": "googleServiceAccount",
                "googleServiceAccount": {"scopes": ["email"]},
                "secretRef": {"name": "google", "key": "key.json"},
            },
            limits=UNLIMITED_RATE,
        ),
        secret("long", key=LONG_SECRET),
        connection("long", upstream, api_key_auth("long"), limits=UNLIMITED_RATE),
        connection("slow", upstream, NO_AUTH, limits={**UNLIMITED_RATE, "timeoutSeconds": 30}),
        connection(
            "bodies",
            upstream,
            NO_AUTH,
            allowedMethods=["GET", "POST"],
            limits={**UNLIMITED_RATE, "maxRequestBytes": len(BODY), "timeoutSeconds": 30},
        ),
        data_app("app", {alias: alias for alias in ("google", "long", "slow", "bodies")}),
        secret("huge", token=HUGE_SECRET),
        connection("huge", upstream, _HUGE_AUTH, limits=_HUGE_LIMITS),
    ]
    quiet = [
        secret("api", key="sk-quiet-0123456789"),
        connection("api", quiet_upstream, api_key_auth("api"), limits=UNLIMITED_RATE),
        data_app("app", {"api": "api"}),
    ]
    return {NOISY: noisy, QUIET: quiet}


@contextmanager
def _attacking(proxy: str, token: str, attack: Attack | None) -> Iterator[Counter[str]]:
    """Runs the attack's workers in a thread of their own until the block ends."""
    outcomes: Counter[str] = Counter()
    if attack is None:
        yield outcomes
        return
    stop = threading.Event()

    async def worker(session: aiohttp.ClientSession) -> None:
        url = f"{proxy}/v1/fetch/{attack.alias}{attack.path}"
        pause = attack.workers / attack.per_second if attack.per_second else 0
        while not stop.is_set():
            await asyncio.sleep(pause)
            try:
                async with session.request(
                    attack.method,
                    url,
                    data=attack.body or None,
                    headers={"Authorization": f"Bearer {token}"},
                ) as reply:
                    outcomes[f"{reply.status} {_code(await reply.read(), reply.status)}"] += 1
                    if reply.status == 503 and attack.retry_after:
                        await asyncio.sleep(float(reply.headers.get("Retry-After", "0")))
            except aiohttp.ClientError:
                outcomes["broken connection"] += 1
                await asyncio.sleep(0.05)

    async def run() -> None:
        _in_idle_time(threading.get_native_id())
        connector = aiohttp.TCPConnector(limit=attack.workers)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await asyncio.gather(*(worker(session) for _ in range(attack.workers)))

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    try:
        time.sleep(2)  # the attack at full strength before B is measured
        yield outcomes
    finally:
        stop.set()
        thread.join(timeout=90)


def _admin_token(cluster: Cluster, namespace: str) -> str:
    """A token of a ServiceAccount bound to gatehouse-admin in ``namespace``."""
    cluster.kubectl("create", "serviceaccount", "admin", "-n", namespace)
    cluster.kubectl(
        "create",
        "rolebinding",
        "admin",
        "--clusterrole=gatehouse-admin",
        f"--serviceaccount={namespace}:admin",
        "-n",
        namespace,
    )
    return cluster.kubectl("create", "token", "admin", "-n", namespace).stdout.strip()


@contextmanager
def _flooding_tests(api: str, token: str, upstream: str) -> Iterator[Counter[str]]:
    """Tenant A's admin: 8 callers testing, 4 drafting, each a 25 MiB answer, back to back."""
    outcomes: Counter[str] = Counter()
    stop = threading.Event()
    prefix = f"{api}/api/v1/namespaces/{NOISY}"
    requests = {
        "test": (f"{prefix}/connections/huge/tests", {"path": HUGE_PATH}),
        "draft": (
            f"{prefix}/connection-drafts/tests",
            {
                "name": "huge",
                "replaces": True,
                "spec": connection("huge", upstream, _HUGE_AUTH, limits=_HUGE_LIMITS)["spec"],
                "secret": HUGE_SECRET,
                "request": {"method": "GET", "path": HUGE_PATH},
            },
        ),
    }

    async def caller(session: aiohttp.ClientSession, kind: str) -> None:
        url, body = requests[kind]
        while not stop.is_set():
            try:
                async with session.post(
                    url, json=body, headers={"Authorization": f"Bearer {token}"}
                ) as reply:
                    answer = await reply.json(content_type=None)
                    why = answer.get("reason") or answer.get("error", {}).get("code", "")
                    outcomes[f"{kind} {reply.status} {why}"] += 1
                    if reply.status == 429:
                        await asyncio.sleep(float(reply.headers.get("Retry-After", "1")))
            except (aiohttp.ClientError, TimeoutError, ValueError):
                outcomes[f"{kind} broken"] += 1
                await asyncio.sleep(0.5)

    async def run() -> None:
        _in_idle_time(threading.get_native_id())
        timeout = aiohttp.ClientTimeout(total=180)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            callers = [caller(session, "test") for _ in range(8)]
            callers += [caller(session, "draft") for _ in range(4)]
            await asyncio.gather(*callers)

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    try:
        time.sleep(5)  # the flood in full flow: its first 25 MiB answers on their way
        yield outcomes
    finally:
        stop.set()
        thread.join(timeout=200)


class _QuietAdmin(threading.Thread):
    """Tenant B's admin, every half second: a test through the service API, then an edit of
    B's DataApp (which the admission webhook checks); each one's seconds are kept."""

    def __init__(self, api: str, token: str, kubeconfig: str) -> None:
        super().__init__(daemon=True)
        self.api = api
        self.token = token
        self.kubeconfig = kubeconfig
        self.tests: list[float] = []
        self.writes: list[float] = []
        self.finished = threading.Event()

    def run(self) -> None:
        with (
            config.new_client_from_config(config_file=self.kubeconfig) as api,  # type: ignore[no-untyped-call]
            httpx.Client(timeout=180) as http,
        ):
            custom = client.CustomObjectsApi(api)
            url = f"{self.api}/api/v1/namespaces/{QUIET}/connections/api/tests"
            count = 0
            while not self.finished.wait(0.5):
                started = time.monotonic()
                reply = http.post(
                    url, json={"path": "/echo/"}, headers={"Authorization": f"Bearer {self.token}"}
                )
                if reply.status_code == 201 and reply.json()["passed"]:
                    self.tests.append(time.monotonic() - started)
                count += 1
                started = time.monotonic()
                custom.patch_namespaced_custom_object(
                    "gatehouse.dev",
                    "v1alpha1",
                    QUIET,
                    "dataapps",
                    "app",
                    {"metadata": {"labels": {"edit": str(count)}}},
                    _content_type="application/merge-patch+json",
                )
                self.writes.append(time.monotonic() - started)


def _test_flood(
    cluster: Cluster,
    local: LocalGatehouse,
    operator: Endpoint,
    proxy: Endpoint,
    others: dict[str, int],
    upstream: str,
    fetch_latency: Callable[[], dict[str, float]],
) -> FloodRow:
    """``others``: more processes whose CPU time the row reports (the other replica, the
    control plane), by name."""
    noisy_token = _admin_token(cluster, NOISY)
    quiet_token = _admin_token(cluster, QUIET)
    listing = f"{local.api_url}/api/v1/namespaces/{QUIET}/connections"
    wait_for(
        lambda: _answers(listing, {"Authorization": f"Bearer {quiet_token}"}),
        timeout=30,
        interval=0.2,
        what="B's admin role",
    )
    operator_memory = _PeakMemory(operator.server.pid)
    proxy_memory = _PeakMemory(proxy.server.pid)
    quiet = _QuietAdmin(local.api_url, quiet_token, str(cluster.kubeconfig))
    for sampler in (operator_memory, proxy_memory):
        sampler.start()
    processes = {"operator": operator.server.pid, "B's replica": proxy.server.pid, **others}
    with _flooding_tests(local.api_url, noisy_token, upstream) as outcomes:
        started = time.monotonic()
        before = {name: cpu_seconds(pid) for name, pid in processes.items()}
        quiet.start()
        fetch = fetch_latency()
        quiet.finished.set()
        quiet.join(timeout=200)
        used = {name: cpu_seconds(pid) - before[name] for name, pid in processes.items()}
        seconds = time.monotonic() - started
    for sampler in (operator_memory, proxy_memory):
        sampler.finished.set()
        sampler.join()
    return FloodRow(
        fetch,
        quiet.tests,
        quiet.writes,
        outcomes,
        operator_memory.peak,
        proxy_memory.peak,
        used,
        seconds,
    )


def measure(
    cluster: Cluster, local: LocalGatehouse, wrk: Wrk, cluster_processes: dict[str, int]
) -> tuple[list[Row], FloodRow]:
    """``cluster_processes``: the control plane's processes by name, whose CPU time the test
    flood's row reports beside ours."""
    _, public_key = service_account_key("bench@gatehouse-bench.iam.gserviceaccount.com")
    tokens = local.start_token_endpoint(public_key, "bench@gatehouse-bench.iam.gserviceaccount.com")
    operator = local.start_operator()
    proxy: Endpoint = local.start_proxy(token_url=f"{tokens.url}/token")
    elsewhere = local.start_proxy(token_url=f"{tokens.url}/token")
    quiet_upstream = local.start_upstream().url
    noisy_upstream = local.start_upstream()
    for thread in os.listdir(f"/proc/{noisy_upstream.server.pid}/task"):
        _in_idle_time(int(thread))
    app_tokens: dict[str, str] = {}
    with config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(cluster.kubeconfig)
    ) as api:
        core = client.CoreV1Api(api)
        for namespace, resources in _tenants(noisy_upstream.url, quiet_upstream).items():
            cluster.kubectl("create", "namespace", namespace)
            cluster.kubectl(
                "apply",
                "-n",
                namespace,
                "-f",
                "-",
                stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": resources}),
            )
            app_tokens[namespace] = wait_for(
                partial(bench_scale.app_token, core, namespace, "app"), timeout=60, interval=0.1
            )
    quiet_url = f"{proxy.url}/v1/fetch/api/echo/"
    quiet_headers = {"Authorization": f"Bearer {app_tokens[QUIET]}"}
    wait_for(lambda: _answers(quiet_url, quiet_headers), timeout=60, interval=0.1, what="B's route")

    def during(attack: Attack | None, target: Endpoint) -> tuple[dict[str, float], Counter[str]]:
        with _attacking(target.url, app_tokens[NOISY], attack) as outcomes:
            latency = wrk(quiet_url, 4, quiet_headers, PAUSE_MS)
        if attack:
            time.sleep(6)  # A's slow requests drain before the next run
        return latency, outcomes

    rows = []
    for attack in [None, *ATTACKS]:
        memory = _PeakMemory(proxy.server.pid)
        memory.start()
        shared, outcomes = during(attack, proxy)
        memory.finished.set()
        memory.join()
        apart = during(attack, elsewhere)[0] if attack else shared
        label = attack.label if attack else "quiet (no attack)"
        rows.append(Row(label, shared["p50"], shared["p99"], outcomes, memory.peak, apart["p99"]))
    flood = _test_flood(
        cluster,
        local,
        operator,
        proxy,
        {"the other replica": elsewhere.server.pid, **cluster_processes},
        noisy_upstream.url,
        lambda: wrk(quiet_url, 4, quiet_headers, PAUSE_MS),
    )
    return rows, flood


def _code(body: bytes, status: int) -> str:
    """The proxy's error code, ``ok``, or ``upstream`` for an error the upstream answered."""
    if status < 400:
        return "ok"
    try:
        return str(json.loads(body)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return "upstream"


def _in_idle_time(thread: int) -> None:
    os.sched_setscheduler(thread, os.SCHED_IDLE, os.sched_param(0))


def _answers(url: str, headers: dict[str, str]) -> bool:
    return httpx.get(url, headers=headers, timeout=5).status_code == 200


class _PeakMemory(threading.Thread):
    """The replica's largest resident size, sampled every 0.2 s until ``finished`` is set."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = rss_mb(pid)
        self.finished = threading.Event()

    def run(self) -> None:
        while not self.finished.wait(0.2):
            self.peak = max(self.peak, rss_mb(self.pid))


def table(results: tuple[list[Row], FloodRow]) -> str:
    rows, flood = results
    quiet = rows[0].p99
    lines = [
        "| tenant A's attack | B p50 ms | B p99 ms | B p99 vs quiet "
        "| B p99 ms, A on another replica | sharing adds | A got | proxy MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        got = ", ".join(f"{count:,}x {outcome}" for outcome, count in row.outcomes.most_common(3))
        lines.append(
            f"| {row.label} | {row.p50:.2f} | {row.p99:.2f} | {row.p99 / quiet:.2f} "
            f"| {row.apart_p99:.2f} | {row.p99 / row.apart_p99:.2f} "
            f"| {got or '-'} | {row.proxy_mb:.0f} |"
        )
    tests, writes = sorted(flood.test_seconds), sorted(flood.write_seconds)
    got = ", ".join(f"{count:,}x {outcome}" for outcome, count in flood.outcomes.most_common(4))
    lines += [
        "",
        "| tenant A's attack | B fetch p50 ms | B fetch p99 ms | B fetch p99 vs quiet "
        "| B's tests s (median, max) | B's DataApp edits s (median, max) | A got "
        "| operator MB | proxy MB |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| 6. connection tests and drafts of 25 MiB answers, 12 at a time "
        f"| {flood.fetch['p50']:.2f} | {flood.fetch['p99']:.2f} "
        f"| {flood.fetch['p99'] / quiet:.2f} | {_spread(tests)} | {_spread(writes)} "
        f"| {got or '-'} | {flood.operator_mb:.0f} | {flood.proxy_mb:.0f} |",
        "",
        f"CPU seconds over those {flood.seconds:.1f} s (the machine has "
        f"{flood.seconds * (os.cpu_count() or 1):.1f}): "
        + ", ".join(f"{name} {used:.2f}" for name, used in flood.cpu_seconds.items()),
    ]
    return "\n".join(lines)


def _spread(seconds: list[float]) -> str:
    if not seconds:
        return "none finished"
    return f"{statistics.median(seconds):.2f}, {max(seconds):.2f} ({len(seconds)})"
