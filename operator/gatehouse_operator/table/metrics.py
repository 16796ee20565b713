"""The operator's Prometheus metrics: the table it publishes, how far the replicas have it, each
resource's readiness, and the process.

Read at each scrape from the live objects, so they never lag the channel's ``/healthz``. Served on
a plain-HTTP port of their own (``GATEHOUSE_METRICS_PORT``), like the proxies'.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from functools import partial

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gatehouse_contract.observability import register_process_metrics
from gatehouse_operator.status import StatusWriter
from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replicas
from gatehouse_operator.table.rollout import Rollout


class Readiness(Collector):
    """One series per resource, its Ready status a label and its value 1:
    ``count by (kind) (...{status="False"})`` counts what is not working. Not kube-state-metrics'
    three series per resource: this is built on the event loop at each scrape, and 20,000
    resources would make 60,000."""

    def __init__(self, status: StatusWriter) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "gatehouse_operator_resource_ready",
            "1 for each resource, labelled with its Ready condition's status (True, False or "
            "Unknown); on the leader, which reconciles.",
            labels=["kind", "namespace", "name", "status"],
        )
        for kind, namespace, name, ready in self.status.readiness():
            family.add_metric([kind, namespace, name, ready], 1.0)
        yield family


class DroppedFrames(Collector):
    """Frames from replicas the operator dropped (``TableChannel.dropped``): unreadable, or
    failed while handled (the stream went on either way; the operator's log says which replica
    and why)."""

    def __init__(self, dropped: Counter[tuple[str, str]]) -> None:
        self.dropped = dropped

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "gatehouse_operator_replica_frames_dropped",
            "Frames from proxy replicas dropped by the operator, by frame type and reason "
            "(unreadable, or failed while handled); the replica's stream goes on.",
            labels=["type", "reason"],
        )
        for (kind, reason), count in sorted(self.dropped.items()):
            family.add_metric([kind, reason], count)
        yield family


def registry(
    journal: Journal,
    replicas: Replicas,
    rollout: Rollout,
    status: StatusWriter,
    dropped_frames: Counter[tuple[str, str]],
) -> CollectorRegistry:
    found = CollectorRegistry()
    register_process_metrics(found, "operator")
    found.register(Readiness(status))
    found.register(DroppedFrames(dropped_frames))
    Gauge(
        "gatehouse_operator_table_version",
        "Version of the newest routing table the operator published (0: none yet).",
        registry=found,
    ).set_function(lambda: journal.version)
    entries = Gauge(
        "gatehouse_operator_table_entries",
        "Routes in the published table, by kind (connection, app).",
        ["kind"],
        registry=found,
    )
    for kind in ("connection", "app"):
        entries.labels(kind).set_function(partial(_count, journal, kind))
    Gauge(
        "gatehouse_operator_table_bytes",
        "Bytes of the published table's routes (what a snapshot carries).",
        registry=found,
    ).set_function(lambda: sum(len(entry.data) for entry in journal.entries.values()))
    # Three gauges, not one with a state label: the states overlap (a current replica is
    # serving, and most serving ones are connected), so a sum over such a label means nothing.
    Gauge(
        "gatehouse_operator_proxy_replicas_serving",
        "Proxy replicas that hold a table, connected or within their grace.",
        registry=found,
    ).set_function(lambda: len(replicas.serving()))
    Gauge(
        "gatehouse_operator_proxy_replicas_connected",
        "Proxy replicas with a table channel open to this operator.",
        registry=found,
    ).set_function(lambda: sum(1 for replica in replicas.by_name.values() if replica.connected))
    Gauge(
        "gatehouse_operator_proxy_replicas_current",
        "Serving proxy replicas that acknowledged the newest table.",
        registry=found,
    ).set_function(lambda: sum(1 for r in replicas.serving() if r.version >= journal.version))
    Gauge(
        "gatehouse_operator_resources_pending",
        "Connections and apps whose latest route not every serving replica holds yet.",
        registry=found,
    ).set_function(lambda: len(rollout.waiting))
    return found


def _count(journal: Journal, kind: str) -> int:
    return sum(1 for entry_kind, _ in journal.entries if entry_kind == kind)


def create_app(found: CollectorRegistry) -> web.Application:
    async def endpoint(request: web.Request) -> web.Response:
        body = generate_latest(found)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", endpoint)
    return app
