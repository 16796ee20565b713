"""Traces through a real proxy to a real OpenTelemetry Collector on 127.0.0.1 (built from
dev/go/otelcol): one trace per fetch, the app's ``traceparent`` continued, a span per phase, and
the upstream receiving the proxy's upstream span as its parent."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.otelcol import Collector
from gatehouse_dev.resources import UNLIMITED_RATE
from gatehouse_dev.services import Endpoint
from gatehouse_dev.waiting import wait_for
from gatehouse_proxy.observation.tracing import PHASES
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    connection,
    data_app,
    fetch,
    received,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

APP_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
APP_SPAN = "00f067aa0ba902b7"
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    started = Collector(tmp_path / "otelcol")
    started.start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def traced(stack: Stack, collector: Collector) -> Iterator[Endpoint]:
    proxy = stack.local.start_proxy(
        settings={
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds: the test waits for the batch
            "GATEHOUSE_AUDIT_LOG": "on",
        }
    )
    try:
        yield proxy
    finally:
        proxy.server.stop()
        stack.local.servers.remove(proxy.server)


def _trace(collector: Collector, trace_id: str) -> list[dict[str, Any]]:
    def complete() -> list[dict[str, Any]] | None:
        spans = [span for span in collector.spans() if span["traceId"] == trace_id]
        return spans if {span["name"] for span in spans} >= {"fetch", *PHASES} else None

    return wait_for(complete, timeout=20)


def test_each_fetch_is_one_trace_continuing_the_apps_and_reaching_the_upstream(
    cluster: Cluster, stack: Stack, namespace: str, collector: Collector, traced: Endpoint
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": "k-traced"}))
    apply(
        cluster,
        namespace,
        connection("vendor", stack.upstream, API_KEY_AUTH, limits=UNLIMITED_RATE),
    )
    apply(cluster, namespace, data_app("sales", {"vendor": "vendor"}))
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
    wait_for(lambda: fetch(traced.url, token, "vendor", "/echo/x").status_code == 200, timeout=20)

    # The app's trace, continued.
    sent = f"00-{APP_TRACE}-{APP_SPAN}-01"
    answer = fetch(traced.url, token, "vendor", "/echo/a", headers={"traceparent": sent})
    upstream_saw = _TRACEPARENT.fullmatch(
        received(stack.upstream, answer)["headers"]["traceparent"]
    )
    assert upstream_saw, received(stack.upstream, answer)["headers"]
    assert upstream_saw[1] == APP_TRACE
    spans = _trace(collector, APP_TRACE)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    (root,) = by_name["fetch"]  # one fetch span: one trace per fetch
    assert root["parentSpanId"] == APP_SPAN
    assert root["resource"]["service.name"] == "gatehouse-proxy"
    for phase in PHASES:
        (span,) = by_name[phase]
        assert span["parentSpanId"] == root["spanId"], phase
    # The upstream's parent is the proxy's upstream call, not the app's span.
    assert upstream_saw[2] == by_name["upstream"][0]["spanId"] != APP_SPAN
    attributes = {item["key"]: item["value"] for item in root.get("attributes", [])}
    assert attributes["gatehouse.connection"] == {"stringValue": f"{namespace}/vendor"}
    assert attributes["http.response.status_code"] == {"intValue": "200"}
    # No path, query or header value in any span.
    assert "/echo/a" not in str(spans)
    assert "k-traced" not in str(spans)

    # No traceparent: a trace is started, and the upstream is in it.
    answer = fetch(traced.url, token, "vendor", "/echo/b")
    started = _TRACEPARENT.fullmatch(received(stack.upstream, answer)["headers"]["traceparent"])
    assert started
    assert started[1] != APP_TRACE
    spans = _trace(collector, started[1])
    (root,) = [span for span in spans if span["name"] == "fetch"]
    assert not root.get("parentSpanId")
    assert started[2] == next(span["spanId"] for span in spans if span["name"] == "upstream")
    # The audit line (and the inspector's record, which it prints) names that same trace.
    audited = wait_for(
        lambda: (
            re.findall(
                r"GET \S+ /echo/b .* trace_id=([0-9a-f]{32})", traced.server.log_path.read_text()
            )
            or None
        ),
        timeout=10,
    )
    assert audited == [started[1]]

    # A refused fetch is a trace too, marked by its code.
    refused = fetch(
        traced.url,
        token,
        "unlinked",
        "/c",
        headers={"traceparent": f"00-{'ab' * 16}-{APP_SPAN}-01"},
    )
    assert refused.status_code >= 400
    spans = wait_for(
        lambda: [span for span in collector.spans() if span["traceId"] == "ab" * 16] or None,
        timeout=20,
    )
    (root,) = [span for span in spans if span["name"] == "fetch"]
    assert root["status"]["code"] == 2  # STATUS_CODE_ERROR
    codes = {item["key"]: item["value"] for item in root["attributes"]}["gatehouse.code"]
    assert codes["stringValue"] != "ok"


def test_without_tracing_the_apps_traceparent_passes_as_it_came(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    apply(cluster, namespace, secret("vendor", **{"api-key": "k-untraced"}))
    apply(cluster, namespace, connection("vendor", stack.upstream, API_KEY_AUTH))
    apply(cluster, namespace, data_app("sales", {"vendor": "vendor"}))
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
    sent = f"00-{APP_TRACE}-{APP_SPAN}-01"

    def relayed() -> httpx.Response | None:
        answer = fetch(stack.proxy, token, "vendor", "/echo/a", headers={"traceparent": sent})
        return answer if answer.status_code == 200 else None

    answer = wait_for(relayed, timeout=20)
    assert received(stack.upstream, answer)["headers"]["traceparent"] == sent


def _answers(url: str, token: str) -> bool:
    return fetch(url, token, "vendor", "/echo/x").status_code == 200


def _ratio_zero_proxy(stack: Stack, collector: Collector, **settings: str) -> Endpoint:
    """A proxy whose installation samples nothing of its own (R4-8's setup)."""
    return stack.local.start_proxy(
        settings={
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0",
            **settings,
        }
    )


def test_an_apps_trace_context_neither_raises_the_sampling_nor_is_exported_by_default(
    cluster: Cluster, stack: Stack, namespace: str, collector: Collector
) -> None:
    """R4-8: with the sampler at 0, every fetch an app flagged "-01" was exported, and its
    tracestate with it. Both are the installation's to allow (proxy.traces)."""
    apply(cluster, namespace, connection("vendor", stack.upstream, {"type": "none"}))
    apply(cluster, namespace, data_app("sales", {"vendor": "vendor"}))
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    token = app_token(cluster, namespace, "dataapp-sales-gatehouse")
    careful = _ratio_zero_proxy(stack, collector)
    trusting = _ratio_zero_proxy(
        stack,
        collector,
        GATEHOUSE_TRACES_FOLLOW_APP_SAMPLING="true",
        GATEHOUSE_TRACES_KEEP_APP_TRACESTATE="true",
    )
    try:
        for proxy in (careful, trusting):
            wait_for(partial(_answers, proxy.url, token), timeout=20)

        def flagged(proxy: Endpoint, index: int) -> dict[str, str]:
            headers = {
                "traceparent": f"00-{index:032x}-{APP_SPAN}-01",
                "tracestate": "vendor=TSCANARY8810",
            }
            answer = fetch(proxy.url, token, "vendor", f"/echo/{index}", headers=headers)
            seen: dict[str, str] = received(stack.upstream, answer)["headers"]
            return seen

        careful_ids = range(1, 11)
        for index in careful_ids:
            seen = flagged(careful, index)
            sent_on = _TRACEPARENT.fullmatch(seen["traceparent"])
            assert sent_on
            assert sent_on[1] == f"{index:032x}"  # the app's trace, continued
            assert seen["traceparent"].endswith("-00")  # unsampled: the ratio decided
            assert "tracestate" not in seen
        # The installation that says so follows the app, and keeps its tracestate.
        seen = flagged(trusting, 99)
        assert seen["traceparent"].endswith("-01")
        assert seen["tracestate"] == "vendor=TSCANARY8810"
        spans = _trace(collector, f"{99:032x}")
        assert all(span.get("traceState") == "vendor=TSCANARY8810" for span in spans)
        # Stopped, the careful proxy exports what it still holds; the collector writes within
        # its flush interval (100 ms).
        careful.server.stop()
        stack.local.servers.remove(careful.server)
        time.sleep(1)
        exported = {span["traceId"] for span in collector.spans()}
        assert not exported & {f"{index:032x}" for index in careful_ids}
        with_canary = {
            span["traceId"] for span in collector.spans() if "TSCANARY8810" in json.dumps(span)
        }
        assert with_canary == {f"{99:032x}"}
    finally:
        for proxy in (careful, trusting):
            if proxy.server in stack.local.servers:
                proxy.server.stop()
                stack.local.servers.remove(proxy.server)
