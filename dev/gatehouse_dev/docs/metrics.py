"""The metrics page: every series both programs expose, read from their real registries."""

from __future__ import annotations

from collections import Counter
from typing import cast

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from gatehouse_dev.docs.markdown import cell, generated, table
from gatehouse_operator.kube import Kube
from gatehouse_operator.status import StatusWriter
from gatehouse_operator.table import metrics as operator_metrics
from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replicas
from gatehouse_operator.table.rollout import Rollout
from gatehouse_operator.table.store import RouteStore
from gatehouse_proxy.observation import metrics as proxy_metrics

PAGE = "reference/metrics.md"
# Prometheus' own process and runtime collectors (gatehouse_contract.observability registers
# them): their set differs by platform, so they are summed up in one line.
_DEFAULTS = ("process_", "python_")


def operator_registry() -> CollectorRegistry:
    """The operator's registry over empty state: what it exposes does not depend on the state."""
    journal, replicas = Journal(), Replicas(grace_seconds=30, on_change=lambda: None)

    async def no_writes(*_: object) -> None:
        raise AssertionError("nothing is written")

    rollout = Rollout(RouteStore(), journal, replicas, no_writes)
    status = StatusWriter(cast(Kube, None))
    return operator_metrics.registry(journal, replicas, rollout, status, Counter())


def _labels(registry: CollectorRegistry, family: Metric) -> tuple[str, ...]:
    # prometheus_client has no public accessor for a family's label names: a labelled metric with
    # no series yet has no samples to read them from, so its declared names are read instead.
    holder = (
        family if hasattr(family, "_labelnames") else registry._names_to_collectors[family.name]
    )
    declared: tuple[str, ...] = tuple(getattr(holder, "_labelnames", ()))
    return declared


def exposed_name(family: Metric) -> str:
    """The family's name as a query spells it (a counter's with ``_total``)."""
    return f"{family.name}_total" if family.type == "counter" else family.name


def rows(registry: CollectorRegistry) -> list[list[str]]:
    found = []
    for family in registry.collect():
        if family.name.startswith(_DEFAULTS):
            continue
        labels = ", ".join(f"`{label}`" for label in _labels(registry, family)) or "none"
        found.append([f"`{exposed_name(family)}`", family.type, labels, cell(family.documentation)])
    return sorted(found)


def render() -> str:
    headers = ["metric", "type", "labels", "help"]
    return "\n".join(
        [
            generated("the proxy's and the operator's Prometheus registries"),
            "# Metrics\n",
            "Labels carry resource names and codes only, never a path, a query string or a "
            "header value. Both programs also expose Prometheus' default `process_*` and "
            "`python_*` series, and `gatehouse_<program>_build_info`.\n",
            "## Proxy\n",
            "Served on the proxy's metrics port. With `proxy.workers` above 1, every series "
            "also has a `worker` label.\n",
            table(headers, rows(proxy_metrics.REGISTRY)),
            "## Operator\n",
            "Served on the operator's metrics port (`GATEHOUSE_METRICS_PORT`).\n",
            table(headers, rows(operator_registry())),
        ]
    )


def pages() -> dict[str, str]:
    return {PAGE: render()}
