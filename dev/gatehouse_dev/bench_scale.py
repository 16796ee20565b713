"""``make bench``, the table channel at scale: N connections, each with its own app, in 10
namespaces, delivered to two proxy replicas; N = 1,000, then 10,000.

Measured, for each N, against the targets of the issue that asked for it:

- bulk: from the API server having accepted every object to the last app's route answering 200
  through both replicas (and both replicas holding all N connections and N apps);
- single apply: one more connection and app with N existing, to the first 200 (p50, max);
- bytes a replica receives for one single change (frames as they arrive, from its /readyz);
- a replica started with N existing: seconds to ready;
- resident memory of the operator and of a proxy replica.

Everything runs on this machine (2 cores here, shared by the API server, etcd, the operator, the
proxies and this script), so the figures are upper bounds of what a cluster would see.
"""

from __future__ import annotations

import base64
import statistics
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import httpx
from kubernetes import client, config

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import rss_mb
from gatehouse_dev.resources import NO_AUTH, UNLIMITED_RATE, connection, data_app
from gatehouse_dev.services import Endpoint, LocalGatehouse
from gatehouse_dev.waiting import wait_for

NAMESPACES = 10
SINGLE_APPLIES = 20
CREATE_THREADS = 16


@dataclass
class Figures:
    connections: int
    create_seconds: float  # for the API server to accept the new objects (context, no target)
    bulk_seconds: float
    single_p50_ms: float
    single_max_ms: float
    change_bytes: int
    late_ready_seconds: float
    operator_rss_mb: float
    proxy_rss_mb: float


def app_token(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    """The proxy credential the operator issued to DataApp ``name``, once it has."""
    try:
        secret = core.read_namespaced_secret(f"dataapp-{name}-gatehouse", namespace)
    except client.ApiException:
        return None
    return base64.b64decode(secret.data["token"]).decode() if secret.data else None


def routed(http: httpx.Client, proxy: str, token: str) -> bool:
    """Whether the app's ``api`` alias answers 200 through ``proxy``."""
    reply = http.get(f"{proxy}/v1/fetch/api/echo/", headers={"Authorization": f"Bearer {token}"})
    return reply.status_code == 200


class ScaleBench:
    def __init__(self, cluster: Cluster, local: LocalGatehouse, upstream: str) -> None:
        self.cluster = cluster
        self.local = local
        self.upstream = upstream
        self.api = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(cluster.kubeconfig)
        )
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.namespaces = [f"scale-{index}-{uuid.uuid4().hex[:4]}" for index in range(NAMESPACES)]
        for namespace in self.namespaces:
            self.cluster.kubectl("create", "namespace", namespace)
        self.created = 0

    def close(self) -> None:
        self.api.close()

    def _create(self, namespace: str, name: str) -> None:
        for plural, document in (
            (
                "externalconnections",
                connection(
                    name,
                    self.upstream,
                    NO_AUTH,
                    allowedPaths=["/echo/"],
                    limits=UNLIMITED_RATE,
                ),
            ),
            ("dataapps", data_app(name, {"api": name})),
        ):
            self.custom.create_namespaced_custom_object(
                "gatehouse.dev", "v1alpha1", namespace, plural, document
            )

    def grow_to(self, total: int, proxies: list[Endpoint]) -> tuple[float, float]:
        """Creates pairs until ``total`` exist: seconds to create them, and from the last
        accepted to all routed."""
        names = [
            (self.namespaces[index % NAMESPACES], f"c{index:05d}")
            for index in range(self.created, total)
        ]
        started = time.perf_counter()
        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            list(pool.map(lambda pair: self._create(*pair), names))
        accepted = time.perf_counter()
        self.created = total
        namespace, name = names[-1]
        token = wait_for(partial(app_token, self.core, namespace, name), timeout=1800, interval=0.2)
        with httpx.Client(timeout=10) as http:
            for proxy in proxies:

                def complete(url: str = proxy.url, admin: str = proxy.admin_url) -> bool:
                    ready = http.get(f"{admin}/readyz").json()
                    if ready.get("connections", 0) < total or ready.get("apps", 0) < total:
                        return False
                    return routed(http, url, token)

                wait_for(
                    complete, timeout=1800, interval=0.2, what=f"{total} routes at {proxy.url}"
                )
        return accepted - started, time.perf_counter() - accepted

    def single_applies(self, proxy: str) -> list[float]:
        seconds = []
        namespace = self.namespaces[0]
        with httpx.Client(timeout=10) as http:
            for index in range(SINGLE_APPLIES):
                name = f"single-{self.created}-{index}"
                started = time.perf_counter()
                self._create(namespace, name)
                token = wait_for(
                    partial(app_token, self.core, namespace, name), timeout=60, interval=0.005
                )
                wait_for(partial(routed, http, proxy, token), timeout=60, interval=0.005)
                seconds.append(time.perf_counter() - started)
        return seconds

    def change_bytes(self, admin: str) -> int:
        """Bytes the replica received for one change (one connection's paths)."""
        namespace = self.namespaces[1]

        def received() -> int:
            return int(httpx.get(f"{admin}/readyz", timeout=10).json()["feed"]["bytesReceived"])

        version = httpx.get(f"{admin}/readyz", timeout=10).json()["tableVersion"]
        time.sleep(6)  # past a heartbeat, so none falls inside the measurement by chance
        before = received()
        self.custom.patch_namespaced_custom_object(
            "gatehouse.dev",
            "v1alpha1",
            namespace,
            "externalconnections",
            "c00001",
            {"spec": {"allowedPaths": ["/echo/", f"/changed-{version}/"]}},
        )
        wait_for(
            lambda: httpx.get(f"{admin}/readyz", timeout=10).json()["tableVersion"] > version,
            timeout=60,
            interval=0.01,
        )
        return received() - before

    def late_replica(self) -> tuple[float, Endpoint]:
        started = time.perf_counter()
        late = self.local.start_proxy()

        def ready() -> bool:
            return httpx.get(f"{late.admin_url}/readyz", timeout=10).status_code == 200

        wait_for(ready, timeout=600, interval=0.05)
        return time.perf_counter() - started, late


def measure(bench: ScaleBench, total: int, operator: Endpoint, proxies: list[Endpoint]) -> Figures:
    create, bulk = bench.grow_to(total, proxies)
    singles = bench.single_applies(proxies[0].url)
    change = bench.change_bytes(proxies[1].admin_url)
    late_seconds, late = bench.late_replica()
    late.server.stop()
    return Figures(
        connections=total,
        create_seconds=create,
        bulk_seconds=bulk,
        single_p50_ms=statistics.median(singles) * 1000,
        single_max_ms=max(singles) * 1000,
        change_bytes=change,
        late_ready_seconds=late_seconds,
        operator_rss_mb=rss_mb(operator.server.pid),
        proxy_rss_mb=max(rss_mb(proxy.server.pid) for proxy in proxies),
    )


TARGETS: list[tuple[str, str, Callable[[Figures], float], float | None]] = [
    ("(creating the new objects, for context)", "s", lambda f: f.create_seconds, None),
    ("bulk: all accepted → last route 200 on 2 replicas", "s", lambda f: f.bulk_seconds, 60),
    ("single apply → first 200, p50", "ms", lambda f: f.single_p50_ms, 250),
    (f"single apply → first 200, max of {SINGLE_APPLIES}", "ms", lambda f: f.single_max_ms, 1000),
    ("bytes to a replica for one change", "B", lambda f: f.change_bytes, 16 * 1024),
    ("replica started late: ready", "s", lambda f: f.late_ready_seconds, 10),
    ("operator RSS", "MB", lambda f: f.operator_rss_mb, 600),
    ("proxy RSS", "MB", lambda f: f.proxy_rss_mb, 250),
]


def table(results: list[Figures]) -> str:
    """Markdown: each figure at each N, the target (at 10,000) and the measured/target ratio."""
    head = " | ".join(f"N = {r.connections:,}" for r in results)
    lines = [
        f"| figure | {head} | target at 10,000 | ratio |",
        "|---" * (len(results) + 3) + "|",
    ]
    for label, unit, read, target in TARGETS:
        cells = " | ".join(f"{read(r):,.1f} {unit}" for r in results)
        if target is None:
            lines.append(f"| {label} | {cells} | | |")
            continue
        ratio = read(results[-1]) / target
        lines.append(f"| {label} | {cells} | ≤ {target:,} {unit} | {ratio:.2f} |")
    return "\n".join(lines)
