"""Traces of fetches, exported over OTLP when configured: a span per fetch that continues the
app's W3C ``traceparent`` (or starts a trace), a span per phase of the proxy's work (admission,
limits, body, credential, upstream, scrub), and the upstream span's ``traceparent`` sent to the
upstream, so its own spans join the app's trace.

Configured by OpenTelemetry's own variables: tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT``
or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (OTLP over HTTP, protobuf), sampled by
``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` (default: the app's decision, else always).
Off, nothing here runs beyond a check per hook, and the app's ``traceparent`` passes as it came.
Spans carry resource names, methods, statuses and error codes only: never a path, a query or a
header value. Spans are exported from the SDK's own thread, never on the event loop.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, get_current_span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

PHASES = ("admission", "limits", "body", "credential", "upstream", "scrub")
_CARRIED = frozenset({"traceparent", "tracestate"})
_OFF = contextlib.nullcontext()
_PROPAGATOR = TraceContextTextMapPropagator()


def _configured() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(
        os.environ.get(name, "").strip()
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


class Tracing:
    """The proxy's tracer, or nothing when tracing is off."""

    def __init__(self, provider: TracerProvider | None) -> None:
        self.provider = provider
        self.tracer: Tracer | None = None
        if provider is not None:
            self.tracer = provider.get_tracer("gatehouse_proxy")

    @classmethod
    def from_env(cls) -> Tracing:
        if not _configured():
            return cls(None)
        # Imported only when on: the SDK and the exporter cost a fraction of a second to load.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        # OTEL_RESOURCE_ATTRIBUTES and the sampler variables are read by the SDK itself; the
        # attributes given here win over them, so the service name is read here.
        name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or "gatehouse-proxy"
        resource = Resource.create({"service.name": name})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        return cls(provider)

    @property
    def on(self) -> bool:
        return self.tracer is not None

    def fetch(
        self, incoming: Iterable[tuple[bytes, bytes]], method: str
    ) -> contextlib.AbstractContextManager[object]:
        """The fetch's span (current while it runs), a child of the app's ``traceparent`` when it
        sent a valid one. ``incoming``: the ASGI scope's raw headers."""
        if self.tracer is None:
            return _OFF
        return self._fetch(self.tracer, incoming, method)

    @contextlib.contextmanager
    def _fetch(
        self, tracer: Tracer, incoming: Iterable[tuple[bytes, bytes]], method: str
    ) -> Iterator[Span]:
        carrier = {}
        for name, value in incoming:
            lowered = name.decode("latin-1").lower()
            if lowered in _CARRIED:
                carrier[lowered] = value.decode("latin-1")
        with tracer.start_as_current_span(
            "fetch",
            context=_PROPAGATOR.extract(carrier),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method},
            # An exception's text could quote a request: errors are marked by code (answered).
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield span

    def phase(self, name: str) -> contextlib.AbstractContextManager[object]:
        """A span for one phase of the current fetch (``PHASES``); none outside a fetch (a
        connection test), where it would start a trace of its own."""
        if self.tracer is None or not get_current_span().get_span_context().is_valid:
            return _OFF
        kind = SpanKind.CLIENT if name == "upstream" else SpanKind.INTERNAL
        return self.tracer.start_as_current_span(
            name, kind=kind, record_exception=False, set_status_on_exception=False
        )

    def outgoing(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The upstream's headers, carrying the current span (the upstream call) in place of the
        app's ``traceparent`` and ``tracestate``."""
        if self.tracer is None:
            return headers
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        if not carrier:
            return headers
        kept = [(name, value) for name, value in headers if name.lower() not in _CARRIED]
        return [*kept, *carrier.items()]

    def answered(self, app: str, connection: str, status: int, code: str) -> None:
        """What the current fetch came to: resource keys, status and outcome code."""
        if self.tracer is None:
            return
        span = get_current_span()
        span.set_attributes(
            {
                "gatehouse.app": app,
                "gatehouse.connection": connection,
                "gatehouse.code": code,
                "http.response.status_code": status,
            }
        )
        if code != "ok":
            span.set_status(Status(StatusCode.ERROR, code))

    def close(self) -> None:
        """Exports what is left (bounded by the SDK's own timeout; it blocks: call it in a
        thread)."""
        if self.provider is not None:
            self.provider.shutdown()
