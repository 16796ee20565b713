"""The proxy's spans, on the real OpenTelemetry SDK kept in memory (the export over OTLP to a
real collector is tests/e2e/test_traces.py), and the one trace id a fetch's records carry (through
a real proxy on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from gatehouse_contract.activity import RequestsQuery
from gatehouse_contract.observability import JSONFormatter
from gatehouse_proxy.observation.audit import AuditSettings
from gatehouse_proxy.observation.tracing import TraceSettings, Tracing
from tests.proxy.serving import Tenant, running_proxy, upstream

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


# What an installation that trusts its apps' trace context sets (both off by default).
TRUSTING = TraceSettings(follow_app_sampling=True, keep_app_tracestate=True)


def _on(
    sampler: ParentBased | None = None, settings: TraceSettings | None = None
) -> tuple[Tracing, InMemorySpanExporter]:
    exported = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler) if sampler else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    return Tracing(provider, settings), exported


def _upstream_headers(tracing: Tracing, sent: list[tuple[bytes, bytes]]) -> dict[str, str]:
    app_headers = [(name.decode(), value.decode()) for name, value in sent]
    with tracing.fetch(sent, "GET"):
        for phase in ("admission", "limits", "credential"):
            with tracing.phase(phase):
                pass
        with tracing.phase("upstream"):
            outgoing = tracing.outgoing([("accept", "*/*"), *app_headers])
        tracing.answered("shop/Deployment/web", "shop/vendor", 200, "ok")
    return dict(outgoing)


def test_off_nothing_is_made_and_the_headers_pass_as_they_came(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    tracing = Tracing.from_env()
    assert not tracing.on
    headers = [("traceparent", f"00-{TRACE}-{PARENT}-01")]
    with tracing.fetch([], "GET"), tracing.phase("upstream"):
        assert tracing.outgoing(headers) is headers


def test_an_endpoint_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    tracing = Tracing.from_env()
    assert tracing.on
    assert tracing.provider is not None
    assert tracing.provider.resource.attributes["service.name"] == "gatehouse-proxy"
    tracing.close()  # nothing was made: nothing is sent
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not Tracing.from_env().on


def test_the_apps_trace_is_continued_and_the_upstream_gets_the_upstream_span() -> None:
    tracing, exported = _on(settings=TRUSTING)
    sent = [(b"traceparent", f"00-{TRACE}-{PARENT}-01".encode()), (b"tracestate", b"app=1")]
    outgoing = _upstream_headers(tracing, sent)
    spans = {span.name: span for span in exported.get_finished_spans()}
    root = spans["fetch"]
    assert f"{root.context.trace_id:032x}" == TRACE
    assert root.parent is not None
    assert f"{root.parent.span_id:016x}" == PARENT
    for phase in ("admission", "limits", "credential", "upstream"):
        parent = spans[phase].parent
        assert parent is not None
        assert parent.span_id == root.context.span_id
    upstream = spans["upstream"].context
    assert outgoing["traceparent"] == f"00-{TRACE}-{upstream.span_id:016x}-01"
    assert outgoing["tracestate"] == "app=1"
    assert dict(root.attributes or {})["gatehouse.connection"] == "shop/vendor"


@pytest.mark.parametrize(
    "traceparent",
    [b"", b"00-" + b"0" * 32 + b"-00f067aa0ba902b7-01", b"garbage", b"00-4bf92f35-00f0-01"],
)
def test_without_a_valid_traceparent_a_trace_is_started(traceparent: bytes) -> None:
    tracing, exported = _on()
    sent = [(b"traceparent", traceparent)] if traceparent else []
    outgoing = _upstream_headers(tracing, sent)
    root = next(span for span in exported.get_finished_spans() if span.name == "fetch")
    assert root.parent is None
    assert outgoing["traceparent"].split("-")[1] == f"{root.context.trace_id:032x}"
    assert outgoing["traceparent"] != traceparent.decode()


def test_unsampled_the_trace_still_reaches_the_upstream_and_nothing_is_exported() -> None:
    tracing, exported = _on(ParentBased(TraceIdRatioBased(0.0)))
    outgoing = _upstream_headers(tracing, [])
    assert not exported.get_finished_spans()
    version, trace, parent, flags = outgoing["traceparent"].split("-")
    assert version == "00"
    assert not int(flags, 16) & 1  # not sampled (02 is level 2's random trace id flag)
    assert int(trace, 16)
    assert int(parent, 16)


def _flagged(index: int, flags: str = "01") -> list[tuple[bytes, bytes]]:
    return [(b"traceparent", f"00-{index + 1:032x}-{PARENT}-{flags}".encode())]


def test_an_apps_sampled_flag_cannot_raise_the_installations_ratio_by_default() -> None:
    """R4-8: with the sampler at 0, every fetch an app flagged "-01" was exported."""
    tracing, exported = _on(ParentBased(TraceIdRatioBased(0.0)))
    sent_upstream = [_upstream_headers(tracing, _flagged(index)) for index in range(20)]
    assert not exported.get_finished_spans()
    for index, headers in enumerate(sent_upstream):
        _, trace, _, flags = headers["traceparent"].split("-")
        assert trace == f"{index + 1:032x}"  # the app's trace, continued unsampled
        assert flags == "00"

    trusting, exported = _on(ParentBased(TraceIdRatioBased(0.0)), TRUSTING)
    for index in range(20):
        _upstream_headers(trusting, _flagged(index))
    fetches = [span for span in exported.get_finished_spans() if span.name == "fetch"]
    assert len(fetches) == 20  # the installation said to follow the apps


def test_by_default_the_ratio_decides_a_fetch_the_app_sent_unsampled_too() -> None:
    """The installation's sampler decides as for a trace's root, by the trace id: the fetch
    stays the app's span's child, and the upstream is told it is sampled."""
    tracing, exported = _on(ParentBased(TraceIdRatioBased(1.0)))
    outgoing = _upstream_headers(tracing, [(b"traceparent", f"00-{TRACE}-{PARENT}-00".encode())])
    root = next(span for span in exported.get_finished_spans() if span.name == "fetch")
    assert f"{root.context.trace_id:032x}" == TRACE
    assert root.parent is not None
    assert f"{root.parent.span_id:016x}" == PARENT
    assert outgoing["traceparent"].endswith("-01")
    # A ratio between: the same fetches as the apps' own traces of those ids would be.
    half, exported = _on(ParentBased(TraceIdRatioBased(0.5)))
    unflagged, _ = _on(ParentBased(TraceIdRatioBased(0.5)))
    ids = range(0, 2**64, 2**57)
    for index in ids:
        _upstream_headers(half, _flagged(index))
    chosen = {span.context.trace_id for span in exported.get_finished_spans()}
    expected = {
        index + 1
        for index in ids
        if unflagged.provider is not None
        and unflagged.provider.sampler.should_sample(
            Context(), index + 1, "fetch"
        ).decision.is_sampled()
    }
    assert chosen == expected
    assert 0 < len(chosen) < len(ids)


@pytest.mark.parametrize("ratio", [1.0, 0.0], ids=["sampled", "not sampled"])
def test_the_apps_tracestate_is_neither_exported_nor_passed_on_by_default(ratio: float) -> None:
    """R4-8: the app's tracestate reached the installation's collector."""
    sent = [(b"traceparent", f"00-{TRACE}-{PARENT}-01".encode()), (b"tracestate", b"v=CANARY")]
    tracing, exported = _on(ParentBased(TraceIdRatioBased(ratio)))
    outgoing = _upstream_headers(tracing, sent)
    assert "tracestate" not in outgoing
    assert all(not span.context.trace_state for span in exported.get_finished_spans())

    keeping = TraceSettings(keep_app_tracestate=True)
    trusting, exported = _on(ParentBased(TraceIdRatioBased(ratio)), keeping)
    outgoing = _upstream_headers(trusting, sent)
    assert outgoing["tracestate"] == "v=CANARY"
    spans = exported.get_finished_spans()
    assert len(spans) == (5 if ratio else 0)
    assert all(span.context.trace_state.to_header() == "v=CANARY" for span in spans)


def test_a_refusal_marks_the_fetch_by_its_code_only() -> None:
    tracing, exported = _on()
    with tracing.fetch([], "POST"):
        tracing.answered("shop/Deployment/web", "shop/vendor", 403, "path_not_allowed")
    (root,) = exported.get_finished_spans()
    assert root.status.description == "path_not_allowed"
    assert dict(root.attributes or {})["http.response.status_code"] == 403


def test_phases_outside_a_fetch_make_no_trace_of_their_own() -> None:
    tracing, exported = _on()
    headers = [("traceparent", f"00-{TRACE}-{PARENT}-01")]
    with tracing.phase("upstream"):  # a connection test's upstream call
        assert tracing.outgoing(headers) == headers
    assert not exported.get_finished_spans()


def test_an_unsampled_app_trace_is_continued_unsampled_with_a_new_parent() -> None:
    tracing, exported = _on(settings=TRUSTING)  # parent-based: the app's decision holds
    sent = [(b"traceparent", f"00-{TRACE}-{PARENT}-00".encode()), (b"tracestate", b"app=1")]
    outgoing = _upstream_headers(tracing, sent)
    assert not exported.get_finished_spans()
    version, trace, parent, flags = outgoing["traceparent"].split("-")
    assert (version, trace, flags) == ("00", TRACE, "00")
    assert parent != PARENT
    assert outgoing["tracestate"] == "app=1"


def test_the_sampler_decides_once_per_fetch() -> None:
    """A fetch sampled by its trace id is recorded whole, under that id; one dropped sends an
    unsampled traceparent and records nothing."""
    tracing, exported = _on(ParentBased(TraceIdRatioBased(0.5)))
    sent_upstream = [_upstream_headers(tracing, [])["traceparent"] for _ in range(200)]
    sampled = {value.split("-")[1] for value in sent_upstream if int(value[-2:], 16) & 1}
    recorded = {f"{span.context.trace_id:032x}" for span in exported.get_finished_spans()}
    assert 0 < len(sampled) < 200
    assert recorded == sampled
    assert len(exported.get_finished_spans()) == len(sampled) * 5  # fetch and four phases


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_the_audit_lines_trace_id_is_the_traces_though_the_app_sent_none(ratio: float) -> None:
    """What the audit line and the inspector show is the id the upstream continues, and, sampled,
    the exported trace's: one trace, sampled or not."""
    tracing, exported = _on(ParentBased(TraceIdRatioBased(ratio)))
    assert tracing.trace_id() == ""  # outside a fetch
    with tracing.fetch([], "GET"):
        shown = tracing.trace_id()
        with tracing.phase("upstream"):
            outgoing = dict(tracing.outgoing([]))
    assert outgoing["traceparent"].split("-")[1] == shown
    recorded = {f"{span.context.trace_id:032x}" for span in exported.get_finished_spans()}
    assert recorded == ({shown} if ratio else set())


def test_the_apps_trace_id_is_shown_when_it_sent_one() -> None:
    tracing, _ = _on(ParentBased(TraceIdRatioBased(0.0)))
    with tracing.fetch([(b"traceparent", f"00-{TRACE}-{PARENT}-00".encode())], "GET"):
        assert tracing.trace_id() == TRACE


def _echoes_traceparent() -> web.Application:
    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"traceparent": request.headers.get("traceparent", "")})

    app = web.Application()
    app.router.add_get("/items", answer)
    return app


@pytest.mark.parametrize("ratio", [1.0, 0.0], ids=["sampled", "not sampled"])
def test_without_a_traceparent_the_inspector_and_audit_carry_the_traces_id(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, ratio: float
) -> None:
    """One id for a fetch the app sent no traceparent with: the exported trace's (when sampled),
    the upstream's traceparent's, the inspector record's and the audit line's."""
    caplog.set_level(logging.INFO, logger="gatehouse.proxy.audit")

    async def scenario() -> None:
        async with upstream(_echoes_traceparent()) as origin:
            tenant = Tenant("one", origin)
            tracing, exported = _on(ParentBased(TraceIdRatioBased(ratio)))
            audit = AuditSettings(enabled=True)
            async with running_proxy(tmp_path, [tenant], tracing=tracing, audit=audit) as running:
                async with httpx.AsyncClient(timeout=10) as client:
                    answer = await client.get(
                        f"{running.url}/v1/fetch/api/items",
                        headers={"Authorization": f"Bearer {tenant.token}"},
                    )
                assert answer.status_code == 200, answer.text
                _, sent, _, flags = answer.json()["traceparent"].split("-")
                assert bool(int(flags, 16) & 1) == (ratio == 1.0)
                (record,) = running.proxy.activity.recent.recent(RequestsQuery(app=tenant.app_key))
                assert record.trace_id == sent
                (line,) = [r for r in caplog.records if r.name == "gatehouse.proxy.audit"]
                assert json.loads(JSONFormatter().format(line))["trace_id"] == sent
                traces = {f"{span.context.trace_id:032x}" for span in exported.get_finished_spans()}
                assert traces == ({sent} if ratio == 1.0 else set())

    asyncio.run(scenario())
