"""The chart's Grafana dashboard: rendered only when asked, labelled for Grafana's sidecar, and
every query names only series and labels the programs export."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.chart.exported import Exported, unknown
from tests.chart.rendered import of_kind, render


def _dashboard() -> tuple[dict[str, Any], dict[str, Any]]:
    documents = render(
        "grafana.dashboard.enabled=true",
        "grafana.dashboard.namespace=monitoring",
        "grafana.dashboard.annotations.grafana_folder=Platform",
    )
    (config_map,) = [
        doc
        for doc in of_kind(documents, "ConfigMap")
        if doc["metadata"]["name"].endswith("-dashboard")
    ]
    return config_map, json.loads(config_map["data"]["gatehouse.json"])


def _queries(dashboard: dict[str, Any]) -> list[tuple[str, str, frozenset[str]]]:
    """(panel title, query, the labels its legend names) for each panel and variable."""
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            legend = frozenset(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            queries.append((panel["title"], target["expr"], legend))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"]
        values = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
        assert values, query
        queries.append((f"${variable['name']}", values[1], frozenset({values[2]})))
    return queries


def test_the_dashboard_is_a_config_map_for_grafanas_sidecar_only_when_enabled() -> None:
    assert not [doc for doc in render() if doc["metadata"]["name"].endswith("-dashboard")]
    config_map, dashboard = _dashboard()
    assert config_map["metadata"]["name"] == "gh-gatehouse-dashboard"
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Platform"}
    assert dashboard["uid"] == "gatehouse"
    assert len(_queries(dashboard)) > 20


def test_every_panel_names_only_exported_series_and_labels(found: Exported) -> None:
    problems = {}
    for title, query, legend in _queries(_dashboard()[1]):
        if wrong := unknown(query, legend, found):
            problems[f"{title}: {query}"] = wrong
    assert not problems
