"""What both programs expose of themselves: every metric documented, build info in each."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from gatehouse_dev.docs.metrics import exposed_name, operator_registry
from gatehouse_proxy.observation import metrics as proxy_metrics

METRICS = Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md"


def _exposed_names(registry: CollectorRegistry) -> set[str]:
    return {exposed_name(family) for family in registry.collect()}


def test_every_metric_of_both_programs_is_in_the_docs() -> None:
    documented = set(re.findall(r"`((?:gatehouse|process|python)_[a-z_*]+)`", METRICS.read_text()))
    names = _exposed_names(proxy_metrics.REGISTRY) | _exposed_names(operator_registry())
    defaults = {name for name in names if name.startswith(("process_", "python_"))}
    assert defaults, "Prometheus' default collectors are registered"
    assert {"process_*", "python_*"} <= documented
    assert sorted(names - defaults - documented) == []


def test_each_program_says_its_build() -> None:
    programs = ((proxy_metrics.REGISTRY, "proxy"), (operator_registry(), "operator"))
    for registry, program in programs:
        assert f"gatehouse_{program}_build_info" in _exposed_names(registry)
