"""What unrelated Secrets cost the operator: 2,000 of 100 KiB each in another namespace, as a
cluster's Helm releases are (each release's manifest is a Secret of hundreds of KiB).

The operator asks the API server only for Secrets labelled ``gatehouse.dev/credential=true``;
these are not, so the target is no change at all: its resident memory, CPU time and bytes read
are taken before and after they are created, with one connection routed through a proxy so that
the operator is at work, not idle. Beside them, the Secret watch events the API server sent
meanwhile (its metric): the API server's own watcher takes one per Secret; an operator watching
every Secret would take another.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import httpx
from kubernetes import client, config

from gatehouse_dev import resources
from gatehouse_dev.bench_scale import app_token, routed
from gatehouse_dev.cluster import Cluster, secret_watch_events
from gatehouse_dev.processes import cpu_seconds, rss_mb
from gatehouse_dev.services import LocalGatehouse
from gatehouse_dev.waiting import wait_for

UNRELATED = 2000
SECRET_KIB = 100
CREATE_THREADS = 4
# Long enough for a watch to deliver and the process to settle.
SETTLE_SECONDS = 10.0


@dataclass(frozen=True)
class Row:
    secrets: int
    megabytes: float
    rss_before_mb: float
    rss_after_mb: float
    cpu_seconds: float
    watch_events: int
    create_seconds: float


def measure(cluster: Cluster, local: LocalGatehouse, upstream: str, count: int = UNRELATED) -> Row:
    operator = local.start_operator()
    proxy = local.start_proxy()
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    try:
        project, releases = f"project-{uuid.uuid4().hex[:4]}", f"releases-{uuid.uuid4().hex[:4]}"
        for namespace in (project, releases):
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        core.create_namespaced_secret(project, resources.secret("api", key="bench-key"))  # type: ignore[arg-type]
        for plural, document in (
            (
                "externalconnections",
                resources.connection("api", upstream, resources.api_key_auth("api")),
            ),
            ("dataapps", resources.data_app("api", {"api": "api"})),
        ):
            custom.create_namespaced_custom_object(
                "gatehouse.dev", "v1alpha1", project, plural, document
            )
        token = wait_for(partial(app_token, core, project, "api"), timeout=60, interval=0.2)
        with httpx.Client(timeout=10) as http:
            wait_for(partial(routed, http, proxy.url, token), timeout=60, what="the route")
        time.sleep(SETTLE_SECONDS)
        pid = operator.server.pid
        rss, cpu, sent = rss_mb(pid), cpu_seconds(pid), secret_watch_events(cluster)
        payload = base64.b64encode(os.urandom(SECRET_KIB * 1024 * 3 // 4)).decode()
        started = time.perf_counter()

        def create(index: int) -> None:
            secret = client.V1Secret(
                metadata=client.V1ObjectMeta(name=f"sh.helm.release.v1.app{index}.v1"),
                type="helm.sh/release.v1",
                data={"release": payload},
            )
            core.create_namespaced_secret(releases, secret)

        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            list(pool.map(create, range(count)))
        created = time.perf_counter() - started
        time.sleep(SETTLE_SECONDS)
        return Row(
            secrets=count,
            megabytes=count * SECRET_KIB / 1024,
            rss_before_mb=rss,
            rss_after_mb=rss_mb(pid),
            cpu_seconds=cpu_seconds(pid) - cpu,
            watch_events=secret_watch_events(cluster) - sent,
            create_seconds=created,
        )
    finally:
        api.close()


def table(row: Row) -> str:
    return "\n".join(
        [
            "| unrelated Secrets | their size | operator RSS before | after | operator CPU "
            "while they were created | Secret watch events sent meanwhile |",
            "|---|---|---|---|---|---|",
            f"| {row.secrets:,} x {SECRET_KIB} KiB | {row.megabytes:.0f} MiB "
            f"| {row.rss_before_mb:.0f} MB | {row.rss_after_mb:.0f} MB "
            f"| {row.cpu_seconds:.2f} s over {row.create_seconds + SETTLE_SECONDS:.0f} s "
            f"| {row.watch_events:,} |",
        ]
    )
