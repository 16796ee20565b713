"""The operator's Prometheus metrics: the table it publishes, and how far the replicas have it.

Read at each scrape from the live objects, so they never lag the channel's ``/healthz``. Served on
a plain-HTTP port of their own (``GATEHOUSE_METRICS_PORT``), like the proxies'.
"""

from __future__ import annotations

from functools import partial

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge
from prometheus_client.exposition import generate_latest

from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replicas
from gatehouse_operator.table.rollout import Rollout


def registry(journal: Journal, replicas: Replicas, rollout: Rollout) -> CollectorRegistry:
    found = CollectorRegistry()
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
    counted = Gauge(
        "gatehouse_operator_proxy_replicas",
        "Proxy replicas: serving (hold a table, connected or within their grace), connected, "
        "and current (acknowledged the newest table).",
        ["state"],
        registry=found,
    )
    counted.labels("serving").set_function(lambda: len(replicas.serving()))
    counted.labels("connected").set_function(
        lambda: sum(1 for replica in replicas.by_name.values() if replica.connected)
    )
    counted.labels("current").set_function(
        lambda: sum(1 for r in replicas.serving() if r.version >= journal.version)
    )
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
