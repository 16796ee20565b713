"""What both programs expose of themselves: every metric documented, build info in each."""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast

from prometheus_client import CollectorRegistry

from gatehouse_operator.kube import Kube
from gatehouse_operator.status import StatusWriter
from gatehouse_operator.table import metrics as operator_metrics
from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replicas
from gatehouse_operator.table.rollout import Rollout
from gatehouse_operator.table.store import RouteStore
from gatehouse_proxy import metrics as proxy_metrics

README = Path(__file__).resolve().parents[2] / "README.md"


def _operator_registry() -> CollectorRegistry:
    journal, replicas = Journal(), Replicas(grace_seconds=30, on_change=lambda: None)

    async def no_writes(*_: object) -> None:
        raise AssertionError("nothing is written")

    rollout = Rollout(RouteStore(), journal, replicas, no_writes)
    return operator_metrics.registry(journal, replicas, rollout, StatusWriter(cast(Kube, None)))


def _exposed_names(registry: CollectorRegistry) -> set[str]:
    """Each family's name as a query spells it (a counter's with ``_total``)."""
    return {
        f"{family.name}_total" if family.type == "counter" else family.name
        for family in registry.collect()
    }


def test_every_metric_of_both_programs_is_in_the_readme() -> None:
    documented = set(re.findall(r"`((?:gatehouse|process|python)_[a-z_*]+)`", README.read_text()))
    names = _exposed_names(proxy_metrics.REGISTRY) | _exposed_names(_operator_registry())
    defaults = {name for name in names if name.startswith(("process_", "python_"))}
    assert defaults, "Prometheus' default collectors are registered"
    assert {"process_*", "python_*"} <= documented
    assert sorted(names - defaults - documented) == []


def test_each_program_says_its_build() -> None:
    programs = ((proxy_metrics.REGISTRY, "proxy"), (_operator_registry(), "operator"))
    for registry, program in programs:
        assert f"gatehouse_{program}_build_info" in _exposed_names(registry)
