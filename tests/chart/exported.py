"""What the two programs export, read from their real registries, and the metric and label
names a PromQL expression uses: so that an alert or a dashboard panel naming a series or a label
nobody exports fails a test instead of staying silent in production.

The proxy's registry is module state, so its series are read in a child process that exercises
each metric once; the operator's registry is made afresh from a reconciled runtime.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gatehouse_operator.table import metrics as operator_metrics
from tests.operator.test_credential_watch import SecretsApi, reconciled

# Labels Prometheus adds to every series it scrapes through the chart's ServiceMonitor.
TARGET_LABELS = frozenset(
    {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}
)
# The proxy Pod's /metrics merges its workers' series under this label (workers.pod_metrics).
PROXY_POD_LABELS = frozenset({"worker"})

_PROXY_EXERCISED = """
from prometheus_client.exposition import generate_latest
from gatehouse_proxy.observation import metrics
labels = metrics.Labels(app="shop/Deployment/web", connection="shop/vendor")
metrics.observe(labels, "GET", 503, 0.1)
metrics.count_token_request("shop/vendor", "issued", shared=True)
metrics.count_alone("shop/vendor")
metrics.count_pause("shop/vendor", "endpoint")
metrics.count_renewal(labels, "renewed")
metrics.count_cut(labels)
metrics.FEED.track(lambda: 3, lambda: 1.5, lambda: True, lambda: 10)
metrics.STORE.track(lambda: True)
metrics.count_store_refusal("shop", "tokens", "share")
metrics.STORE_MEMORY.track(lambda: (1, 2), lambda: {"shop": (3, 4)}, lambda: (5, 6))
print(generate_latest(metrics.REGISTRY).decode())
"""


@dataclass
class Exported:
    """Series names (as scraped: ``_total``, ``_bucket``...) and the labels each carries."""

    series: dict[str, frozenset[str]] = field(default_factory=dict)

    def add(self, exposition: str, extra: frozenset[str]) -> None:
        for family in text_string_to_metric_families(exposition):
            for sample in family.samples:
                known = self.series.get(sample.name, TARGET_LABELS | extra)
                self.series[sample.name] = known | set(sample.labels)


def exported() -> Exported:
    found = Exported()
    proxy = subprocess.run(
        [sys.executable, "-c", _PROXY_EXERCISED], capture_output=True, text=True, check=True
    ).stdout
    found.add(proxy, PROXY_POD_LABELS)
    runtime = reconciled(SecretsApi(None, False, status=403))  # one resource, not Ready
    registry = operator_metrics.registry(
        runtime.journal, runtime.replicas, runtime.rollout, runtime.status, runtime.channel.dropped
    )
    found.add(generate_latest(registry).decode(), frozenset())
    return found


@dataclass(frozen=True)
class Names:
    """What an expression names: each selector's metric and matcher labels, and the labels it
    groups or joins on (checked against all of its metrics together)."""

    selectors: tuple[tuple[str, frozenset[str]], ...]
    grouping: frozenset[str]


_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`|\[[^\]]*\]|\$\{?\w+\}?'
    r"|[A-Za-z_:][A-Za-z0-9_:]*|[{}(),]|[^\sA-Za-z_:{}(),\"'`\[$]+"
)
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_KEYWORDS = {"and", "or", "unless", "bool", "offset", *_GROUPING}


def _tokens(expr: str) -> list[str]:
    return [token for token in _TOKEN.findall(expr) if not token.isspace()]


def names(expr: str) -> Names:
    """A small PromQL scanner: enough for the chart's alerts and dashboard queries."""
    tokens = _tokens(expr)
    selectors: list[tuple[str, frozenset[str]]] = []
    grouping: set[str] = set()
    position = 0

    def matchers(start: int) -> tuple[frozenset[str], int]:
        labels, index = set(), start + 1
        while tokens[index] != "}":
            if re.fullmatch(r"[A-Za-z_]\w*", tokens[index]) and tokens[index - 1] in "{,":
                labels.add(tokens[index])
            index += 1
        return frozenset(labels), index + 1

    def listed(start: int) -> tuple[set[str], int]:
        index = start + 1
        while tokens[index] != ")":
            index += 1
        return set(tokens[start + 1 : index]) - {","}, index + 1

    while position < len(tokens):
        token = tokens[position]
        following = tokens[position + 1] if position + 1 < len(tokens) else ""
        if token in _GROUPING and following == "(":
            grouped, position = listed(position + 1)
            grouping |= grouped
        elif token == "{":  # a selector without a metric name
            labels, position = matchers(position)
            selectors.append(("", labels))
        elif re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", token) and token not in _KEYWORDS:
            if following == "(" or following in _GROUPING:  # a function or an aggregation
                position += 1
            elif following == "{":
                labels, position = matchers(position + 1)
                selectors.append((token, labels))
            else:
                selectors.append((token, frozenset()))
                position += 1
        else:
            position += 1
    return Names(tuple(selectors), frozenset(grouping))


def unknown(expr: str, extra_labels: frozenset[str], found: Exported) -> list[str]:
    """What ``expr`` (and ``extra_labels``, e.g. an alert's ``$labels.x``) names that no program
    exports; empty when everything it names exists."""
    named = names(expr)
    problems: list[str] = []
    together: set[str] = set()
    for metric, labels in named.selectors:
        if metric not in found.series:
            problems.append(f"metric {metric or '(none)'}")
            continue
        together |= found.series[metric]
        problems += [
            f"label {label} of {metric}" for label in sorted(labels - found.series[metric])
        ]
    problems += [f"label {label}" for label in sorted((named.grouping | extra_labels) - together)]
    return problems
