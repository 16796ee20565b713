"""The chart's alerts, rendered by helm and evaluated by promtool: each fires on the series it is
written for and stays quiet on healthy ones, and names only series and labels the programs export.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gatehouse_dev.promtool import ensure_promtool
from tests.chart.exported import Exported, unknown
from tests.chart.rendered import of_kind, render

PROXY = 'job="gh-gatehouse-proxy-metrics"'
OPERATOR = 'job="gh-gatehouse-operator-metrics"'
FOR_MINUTES = 10
FIRED = f"{FOR_MINUTES + 2}m"  # past `for`, evaluated every minute


def _series(metric: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{metric}{{{labels}}}", "values": values}


# Per alert: (input series, the labels of each alert expected at FIRED beyond severity and the
# rule's own). Every alert has a healthy input too, and a condition shorter than `for`.
FIRING: dict[str, tuple[list[dict[str, str]], list[dict[str, str]]]] = {
    "GatehouseProxyTableFeedDown": (
        [
            _series("gatehouse_proxy_table_feed_connected", f'{PROXY},pod="p-1"', "0x20"),
            _series("gatehouse_proxy_table_feed_connected", f'{PROXY},pod="p-2"', "1x20"),
            _series("gatehouse_proxy_table_feed_connected", f'{PROXY},pod="p-3"', "0x5 1x15"),
        ],
        [{"job": "gh-gatehouse-proxy-metrics", "pod": "p-1"}],
    ),
    "GatehouseProxyWithoutTable": (
        [
            _series("gatehouse_proxy_table_version", f'{PROXY},pod="p-1"', "0x20"),
            _series("gatehouse_proxy_table_version", f'{PROXY},pod="p-2"', "7x20"),
            _series("gatehouse_proxy_table_version", f'{PROXY},pod="p-3"', "0x5 7x15"),
        ],
        [{"job": "gh-gatehouse-proxy-metrics", "pod": "p-1"}],
    ),
    "GatehouseResourcesPending": (
        [_series("gatehouse_operator_resources_pending", f'{OPERATOR},pod="o-1"', "3x20")],
        [{"job": "gh-gatehouse-operator-metrics", "pod": "o-1"}],
    ),
    "GatehouseOperatorAbsent": (
        [_series("gatehouse_proxy_table_version", f'{PROXY},pod="p-1"', "7x20")],
        [{"job": "gh-gatehouse-operator-metrics"}],
    ),
    "GatehouseNoProxyReplicas": (
        [
            _series("gatehouse_operator_proxy_replicas_serving", f'{OPERATOR},pod="o-1"', "0x20"),
            _series("gatehouse_operator_proxy_replicas_serving", f'{OPERATOR},pod="o-2"', "0x20"),
        ],
        [{}],
    ),
    "GatehouseResourceNotReady": (
        [
            _series(
                "gatehouse_operator_resource_ready",
                f'{OPERATOR},kind="ExternalConnection",namespace="shop",name="vendor",'
                'status="False"',
                "1x20",
            ),
            _series(
                "gatehouse_operator_resource_ready",
                f'{OPERATOR},kind="ExternalConnection",namespace="shop",name="maps",status="True"',
                "1x20",
            ),
        ],
        [
            {
                "job": "gh-gatehouse-operator-metrics",
                "kind": "ExternalConnection",
                "namespace": "shop",
                "name": "vendor",
                "status": "False",
            }
        ],
    ),
    "GatehouseProxyUpstreamErrors": (
        [
            # shop/vendor: 3 of 10 answers 5xx a minute; shop/maps: 1 of 10.
            _series(
                "gatehouse_proxy_requests_total",
                f'{PROXY},namespace="shop",connection="vendor",status="5xx"',
                "0+3x20",
            ),
            _series(
                "gatehouse_proxy_requests_total",
                f'{PROXY},namespace="shop",connection="vendor",status="2xx"',
                "0+7x20",
            ),
            _series(
                "gatehouse_proxy_requests_total",
                f'{PROXY},namespace="shop",connection="maps",status="5xx"',
                "0+1x20",
            ),
            _series(
                "gatehouse_proxy_requests_total",
                f'{PROXY},namespace="shop",connection="maps",status="2xx"',
                "0+9x20",
            ),
        ],
        [{"namespace": "shop", "connection": "vendor"}],
    ),
    # Its `for` is its own (5m), not the chart's: the series turns 0 at minute 7, so it is
    # pending at the first check and has fired by FIRED.
    "GatehouseProxyCountingAlone": (
        [
            _series("gatehouse_proxy_store_up", f'{PROXY},pod="p-1",worker="0"', "1x6 0x14"),
            _series("gatehouse_proxy_store_up", f'{PROXY},pod="p-1",worker="1"', "1x20"),
        ],
        [{"job": "gh-gatehouse-proxy-metrics", "pod": "p-1", "worker": "0"}],
    ),
    # Two workers of one Pod read the same store: 70 % of its maxmemory, one alert.
    "GatehouseStoreNearlyFull": (
        [
            _series(
                "gatehouse_proxy_store_used_memory_bytes", f'{PROXY},worker="0"', "47000000x20"
            ),
            _series("gatehouse_proxy_store_max_memory_bytes", f'{PROXY},worker="0"', "67108864x20"),
            _series(
                "gatehouse_proxy_store_used_memory_bytes", f'{PROXY},worker="1"', "46000000x20"
            ),
            _series("gatehouse_proxy_store_max_memory_bytes", f'{PROXY},worker="1"', "67108864x20"),
        ],
        [{"job": "gh-gatehouse-proxy-metrics"}],
    ),
    # shop's share refuses its writes all the while; maps' once, at the start.
    "GatehouseStoreShareFull": (
        [
            _series(
                "gatehouse_proxy_store_refused_total",
                f'{PROXY},namespace="shop",what="tokens",reason="share"',
                "0+5x20",
            ),
            _series(
                "gatehouse_proxy_store_refused_total",
                f'{PROXY},namespace="maps",what="counters",reason="share"',
                "0 1x19",
            ),
        ],
        [{"job": "gh-gatehouse-proxy-metrics", "namespace": "shop"}],
    ),
}

# The value an alert's annotations quote (``{{ $value }}``), where they do.
VALUES = {"GatehouseResourcesPending": "3"}

# Per alert: series on which it must stay quiet for the whole window.
QUIET: dict[str, list[dict[str, str]]] = {
    "GatehouseProxyTableFeedDown": [
        _series("gatehouse_proxy_table_feed_connected", f'{PROXY},pod="p-1"', "1x20")
    ],
    "GatehouseProxyWithoutTable": [
        _series("gatehouse_proxy_table_version", f'{PROXY},pod="p-1"', "3x20")
    ],
    "GatehouseResourcesPending": [
        _series("gatehouse_operator_resources_pending", f'{OPERATOR},pod="o-1"', "0x20"),
        # Changes that reached every replica within `for`.
        _series("gatehouse_operator_resources_pending", f'{OPERATOR},pod="o-2"', "2x5 0x15"),
    ],
    "GatehouseOperatorAbsent": [
        _series("gatehouse_operator_build_info", f'{OPERATOR},pod="o-1",version="1"', "1x20")
    ],
    "GatehouseNoProxyReplicas": [
        _series("gatehouse_operator_proxy_replicas_serving", f'{OPERATOR},pod="o-1"', "0x20"),
        _series("gatehouse_operator_proxy_replicas_serving", f'{OPERATOR},pod="o-2"', "2x20"),
    ],
    "GatehouseResourceNotReady": [
        _series(
            "gatehouse_operator_resource_ready",
            f'{OPERATOR},kind="App",namespace="shop",name="web",status="True"',
            "1x20",
        )
    ],
    "GatehouseProxyUpstreamErrors": [
        _series(
            "gatehouse_proxy_requests_total",
            f'{PROXY},namespace="shop",connection="vendor",status="5xx"',
            "0+1x20",
        ),
        _series(
            "gatehouse_proxy_requests_total",
            f'{PROXY},namespace="shop",connection="vendor",status="2xx"',
            "0+9x20",
        ),
    ],
    "GatehouseProxyCountingAlone": [
        _series("gatehouse_proxy_store_up", f'{PROXY},pod="p-1",worker="0"', "1x20"),
        # A store restart shorter than `for`.
        _series("gatehouse_proxy_store_up", f'{PROXY},pod="p-2",worker="0"', "1x8 0x3 1x9"),
    ],
    "GatehouseStoreNearlyFull": [
        _series("gatehouse_proxy_store_used_memory_bytes", f'{PROXY},pod="p-1"', "30000000x20"),
        _series("gatehouse_proxy_store_max_memory_bytes", f'{PROXY},pod="p-1"', "67108864x20"),
        # An external store without maxmemory: nothing to fill.
        _series("gatehouse_proxy_store_used_memory_bytes", f'{PROXY},pod="p-2"', "90000000x20"),
        _series("gatehouse_proxy_store_max_memory_bytes", f'{PROXY},pod="p-2"', "0x20"),
    ],
    "GatehouseStoreShareFull": [
        _series(
            "gatehouse_proxy_store_refused_total",
            f'{PROXY},namespace="shop",what="tokens",reason="share"',
            "3x20",
        )
    ],
}


@pytest.fixture(scope="module")
def rules() -> list[dict[str, Any]]:
    documents = render(
        "prometheus.serviceMonitor.enabled=true",
        "prometheus.prometheusRule.enabled=true",
        f"prometheus.prometheusRule.for={FOR_MINUTES}m",
    )
    (rule,) = of_kind(documents, "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return [item for group in groups for item in group["rules"]]


def _annotations(rule: dict[str, Any], labels: dict[str, str]) -> dict[str, str]:
    """The rule's annotations with ``{{ $labels.x }}`` and ``{{ $value }}`` filled in as
    Prometheus would."""

    def filled(text: str) -> str:
        text = text.replace("{{ $value }}", VALUES.get(rule["alert"], ""))
        return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)

    return {name: filled(text) for name, text in rule.get("annotations", {}).items()}


def _case(name: str, series: list[dict[str, str]], checks: list[Any]) -> dict[str, Any]:
    return {"name": name, "interval": "1m", "input_series": series, "alert_rule_test": checks}


def _promtool_tests(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tests: list[dict[str, Any]] = []
    for rule in rules:
        alert = rule["alert"]
        series, fired = FIRING[alert]
        expected = []
        for labels in fired:
            every = {**rule.get("labels", {}), **labels}
            expected.append({"exp_labels": every, "exp_annotations": _annotations(rule, every)})
        checks = [
            {"eval_time": f"{FOR_MINUTES - 5}m", "alertname": alert, "exp_alerts": []},
            {"eval_time": FIRED, "alertname": alert, "exp_alerts": expected},
        ]
        tests.append(_case(f"{alert} fires", series, checks))
        quiet = [
            {"eval_time": time, "alertname": alert, "exp_alerts": []}
            for time in (f"{FOR_MINUTES - 5}m", FIRED, "20m")
        ]
        tests.append(_case(f"{alert} stays quiet", QUIET[alert], quiet))
    return tests


def test_every_alert_has_a_firing_and_a_quiet_case(rules: list[dict[str, Any]]) -> None:
    alerts = {rule["alert"] for rule in rules}
    assert alerts == set(FIRING) == set(QUIET)


def test_promtool_evaluates_every_alert_firing_and_quiet(
    rules: list[dict[str, Any]], tmp_path: Path
) -> None:
    group = {"name": "gatehouse", "rules": rules}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [group]}))
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": _promtool_tests(rules),
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    promtool = ensure_promtool()
    for command in (("check", "rules", "rules.yaml"), ("test", "rules", "tests.yaml")):
        done = subprocess.run(
            [str(promtool), *command], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_alerts_name_only_exported_series_and_labels(
    rules: list[dict[str, Any]], found: Exported
) -> None:
    problems = {}
    for rule in rules:
        templated = " ".join(rule.get("annotations", {}).values())
        labels = frozenset(re.findall(r"\$labels\.(\w+)", templated))
        if wrong := unknown(rule["expr"], labels, found):
            problems[rule["alert"]] = wrong
    assert not problems


def test_the_check_catches_a_misspelt_metric_or_label(found: Exported) -> None:
    assert unknown("gatehouse_proxy_table_feed_connectd == 0", frozenset(), found) == [
        "metric gatehouse_proxy_table_feed_connectd"
    ]
    assert unknown(
        'sum by (tenant) (rate(gatehouse_proxy_requests_total{stauts="5xx"}[5m]))',
        frozenset({"pod", "conection"}),
        found,
    ) == ["label stauts of gatehouse_proxy_requests_total", "label conection", "label tenant"]
    assert unknown("absent(gatehouse_operator_build_info)", frozenset({"kind"}), found) == [
        "label kind"
    ]
