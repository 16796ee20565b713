"""What tracing adds to a fetch: the proxy's tracing hooks, as one fetch calls them (the fetch
span, its six phases, the upstream's ``traceparent``, the outcome), timed in this process with
tracing off, on with 1 fetch in 100 sampled, and on with every fetch sampled, the spans exported
over OTLP to a real collector (dev/go/otelcol) by the SDK's batch processor as the proxy does.

The share of a fetch is the hooks' time over the proxy's own time per fetch at 32 connections
(one core's second over its requests per second, from the latency section's row), so it is
comparable with the ≤ 1 % (off) and ≤ 3 % (1 %) budgets.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from gatehouse_dev.otelcol import Collector
from gatehouse_proxy.observation.tracing import PHASES, Tracing

FETCHES = 20_000
RUNS = 3
_SENT = [(b"authorization", b"Bearer x")]
_TRACED = [*_SENT, (b"traceparent", b"00-" + b"4b" * 16 + b"-" + b"00f0" * 4 + b"-01")]
_OUTGOING = [("accept", "*/*"), ("traceparent", "00-" + "4b" * 16 + "-" + "00f0" * 4 + "-01")]


def _fetches(tracing: Tracing, sent: list[tuple[bytes, bytes]], count: int) -> float:
    """Seconds per fetch of the hooks alone (best of RUNS)."""
    best = float("inf")
    for _ in range(RUNS):
        started = time.perf_counter()
        for _ in range(count):
            with tracing.fetch(sent, "GET"):
                for phase in PHASES[:-1]:
                    with tracing.phase(phase):
                        if phase == "upstream":
                            tracing.outgoing(_OUTGOING)
                tracing.answered("shop/Deployment/web", "shop/vendor", 200, "ok")
                with tracing.phase(PHASES[-1]):
                    pass
        best = min(best, (time.perf_counter() - started) / count)
    return best


def measure() -> dict[str, float]:
    """Microseconds of tracing per fetch, by setting."""
    with tempfile.TemporaryDirectory() as folder:
        collector = Collector(Path(folder))
        collector.start()
        try:
            found = {"off": _fetches(Tracing(None), _TRACED, FETCHES) * 1e6}
            # The ratio applies to fetches that start a trace (the app's sampled traceparent
            # would sample every one), so the 1 % row's fetches send none.
            for label, ratio, sent in (
                ("on, 1 % sampled", 0.01, _SENT),
                ("on, every fetch sampled", 1.0, _TRACED),
            ):
                provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
                exporter = OTLPSpanExporter(endpoint=f"{collector.endpoint}/v1/traces")
                provider.add_span_processor(BatchSpanProcessor(exporter))
                tracing = Tracing(provider)
                found[label] = _fetches(tracing, sent, FETCHES) * 1e6
                tracing.close()
        finally:
            collector.stop()
    return found


def table(found: dict[str, float], fetch_us: float | None) -> str:
    lines = ["| tracing | µs per fetch | share of a fetch at 32 connections |", "|---|---|---|"]
    for label, micros in found.items():
        share = f"{micros / fetch_us:.2%}" if fetch_us else "(latency section not run)"
        lines.append(f"| {label} | {micros:.1f} | {share} |")
    return "\n".join(lines)
