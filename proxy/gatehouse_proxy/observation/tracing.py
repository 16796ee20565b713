"""Traces of fetches, exported over OTLP when configured: a span per fetch that continues the
app's W3C ``traceparent`` (or starts a trace), a span per phase of the proxy's work (admission,
limits, body, credential, upstream, scrub), and the upstream span's ``traceparent`` sent to the
upstream, so its own spans join the app's trace.

Configured by OpenTelemetry's own variables: tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT``
or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (OTLP over HTTP, protobuf), sampled by
``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` (default: always). What an app's trace
context may decide is the installation's (:class:`TraceSettings`): by default an app's sampled
flag does not make a fetch sampled, so the sampler's ratio bounds what is exported whatever apps
send, and an app's ``tracestate`` is neither exported nor passed on. Off, nothing here runs
beyond a check per hook, and the app's ``traceparent`` passes as it came.
Spans carry resource names, methods, statuses and error codes only: never a path, a query or a
header value. Spans are exported from the SDK's own thread, never on the event loop.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.trace import (
    INVALID_SPAN_CONTEXT,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
    TraceState,
    get_current_span,
    set_span_in_context,
    use_span,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gatehouse_proxy.observation.trace_ids import random_id

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

PHASES = ("admission", "limits", "body", "credential", "upstream", "scrub")
_CARRIED = frozenset({"traceparent", "tracestate"})
_CARRIED_RAW = frozenset({b"traceparent", b"tracestate"})  # ASGI names are lower-case
_OFF = contextlib.nullcontext()
_PROPAGATOR = TraceContextTextMapPropagator()
_NO_PARENT = Context()
_NO_STATE = TraceState()
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


@dataclass(frozen=True)
class TraceSettings:
    """What an app's trace context may decide, when tracing is on (the installation's
    settings: GATEHOUSE_TRACES_FOLLOW_APP_SAMPLING, GATEHOUSE_TRACES_KEEP_APP_TRACESTATE)."""

    # Whether an app's sampled flag decides its fetches' sampling (OpenTelemetry's parent-based
    # rule). Off, the sampler decides each fetch as a trace's root, by its trace id (the app's,
    # continued all the same): an app's "-01" cannot raise the share exported, and so the cost.
    follow_app_sampling: bool = False
    # Whether an app's tracestate (vendors' data in the app's trace) is kept: exported with the
    # fetch's spans and passed on to the upstream. Off, the proxy drops it.
    keep_app_tracestate: bool = False


class _Fetch:
    """The current fetch as tracing decided it: its trace id, and whether it is recorded (its
    span and its phases' spans current in the SDK's context)."""

    __slots__ = ("recording", "trace_id", "trace_state")

    def __init__(self, trace_id: int, recording: bool, trace_state: str) -> None:
        self.trace_id = trace_id
        self.recording = recording
        self.trace_state = trace_state


# The sampler is asked here, once a fetch, and the SDK starts a span only for a fetch it keeps:
# the SDK's own span for a dropped fetch (and its propagator) cost ~4 µs more a fetch, measured,
# more than a third of tracing's budget at 1 % sampling. For a kept fetch without a parent the
# SDK asks the sampler again, about the same trace id (_CHOSEN), so both agree.
_FETCH: ContextVar[_Fetch | None] = ContextVar("gatehouse_tracing_fetch", default=None)
_CHOSEN: ContextVar[int] = ContextVar("gatehouse_tracing_chosen", default=0)


def _configured() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(
        os.environ.get(name, "").strip()
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _id_generator() -> object:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class ChosenTraceIds(RandomIdGenerator):
        """Starts a sampled trace with the id the sampler decided on."""

        def generate_trace_id(self) -> int:
            return _CHOSEN.get() or super().generate_trace_id()

    return ChosenTraceIds()


class Tracing:
    """The proxy's tracer, or nothing when tracing is off."""

    def __init__(
        self, provider: TracerProvider | None, settings: TraceSettings | None = None
    ) -> None:
        self.provider = provider
        self.settings = settings or TraceSettings()
        self.tracer: Tracer | None = None
        if provider is not None:
            provider.id_generator = _id_generator()  # type: ignore[assignment]
            self.tracer = provider.get_tracer("gatehouse_proxy")

    @classmethod
    def from_env(cls, settings: TraceSettings | None = None) -> Tracing:
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
        return cls(provider, settings)

    @property
    def on(self) -> bool:
        return self.tracer is not None

    def fetch(
        self, incoming: Iterable[tuple[bytes, bytes]], method: str
    ) -> contextlib.AbstractContextManager[object]:
        """The fetch's span (current while it runs), a child of the app's ``traceparent`` when it
        sent a valid one; when the sampler drops it, only its trace id, which the audit line,
        the inspector and the upstream's ``traceparent`` still carry. ``incoming``: the ASGI
        scope's raw headers."""
        if self.tracer is None or self.provider is None:
            return _OFF
        carrier = {
            name.decode(): value.decode("latin-1")
            for name, value in incoming
            if name in _CARRIED_RAW
        }
        # Never the current context: a fetch's parent is what the app sent, or nothing.
        sent = (
            get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
            if carrier
            else INVALID_SPAN_CONTEXT
        )
        trace_id = sent.trace_id if sent.is_valid else random_id(128)
        kept = sent.is_valid and self.settings.keep_app_tracestate
        state = sent.trace_state if kept else _NO_STATE
        # The app's sampled flag decides only where the installation lets it; otherwise the
        # fetch is asked as a root (by its trace id), and the SDK, which asks again with the
        # parent, is given the parent as sampled.
        follows = sent.is_valid and self.settings.follow_app_sampling
        asked = _parent(sent, sent.trace_flags, state) if follows else _NO_PARENT
        decided = self.provider.sampler.should_sample(asked, trace_id, "fetch").decision
        if not decided.is_sampled():  # type: ignore[no-untyped-call]
            return _Scope(_Fetch(trace_id, False, state.to_header()), None)
        parent = asked if follows or not sent.is_valid else _parent(sent, _SAMPLED, state)
        chosen = _CHOSEN.set(0 if sent.is_valid else trace_id)
        try:  # the SDK takes the trace id here, and samples it as above
            span = self.tracer.start_span(
                "fetch",
                context=parent,
                kind=SpanKind.SERVER,
                attributes={"http.request.method": method},
            )
        finally:
            _CHOSEN.reset(chosen)
        # An exception's text could quote a request: errors are marked by their code only.
        used = use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        )
        return _Scope(_Fetch(trace_id, True, ""), used)

    def trace_id(self) -> str:
        """The current fetch's trace id (the app's, or the one started here, sampled or not),
        or "" when tracing is off or outside a fetch."""
        fetch = _FETCH.get()
        return "" if fetch is None else f"{fetch.trace_id:032x}"

    def phase(self, name: str) -> contextlib.AbstractContextManager[object]:
        """A span for one phase of the current fetch (``PHASES``); none when the fetch is not
        sampled, or outside a fetch (a connection test), where it would start a trace of its
        own."""
        fetch = _FETCH.get()
        if fetch is None or not fetch.recording:
            return _OFF
        assert self.tracer is not None  # a fetch is traced only with a tracer
        kind = SpanKind.CLIENT if name == "upstream" else SpanKind.INTERNAL
        return self.tracer.start_as_current_span(
            name, kind=kind, record_exception=False, set_status_on_exception=False
        )

    def outgoing(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The upstream's headers, carrying the current span (the upstream call) in place of the
        app's ``traceparent`` (and the trace's ``tracestate``); a fetch not sampled passes its
        trace on unsampled, as a child of this hop."""
        fetch = _FETCH.get()
        if fetch is None:
            return headers
        carrier: dict[str, str] = {}
        if fetch.recording:
            _PROPAGATOR.inject(carrier)
        else:
            carrier["traceparent"] = f"00-{fetch.trace_id:032x}-{random_id(64):016x}-00"
            if fetch.trace_state:
                carrier["tracestate"] = fetch.trace_state
        kept = [(name, value) for name, value in headers if name.lower() not in _CARRIED]
        return [*kept, *carrier.items()]

    def answered(self, app: str, connection: str, status: int, code: str) -> None:
        """What the current fetch came to: resource keys, status and outcome code."""
        fetch = _FETCH.get()
        if fetch is None or not fetch.recording:
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


def _parent(sent: SpanContext, flags: TraceFlags, state: TraceState) -> Context:
    """The app's span as a fetch's parent, with the sampling and the tracestate the proxy keeps
    of it."""
    kept = SpanContext(sent.trace_id, sent.span_id, True, flags, state)
    return set_span_in_context(NonRecordingSpan(kept), _NO_PARENT)


class _Scope:
    """A fetch's tracing while it runs: the decision current, and its span when recorded. A
    class, not a generator: a fetch enters and leaves it on every request."""

    __slots__ = ("_fetch", "_span", "_token")

    def __init__(
        self, fetch: _Fetch, span: contextlib.AbstractContextManager[object] | None
    ) -> None:
        self._fetch = fetch
        self._span = span

    def __enter__(self) -> None:
        self._token = _FETCH.set(self._fetch)
        if self._span is not None:
            self._span.__enter__()

    def __exit__(self, *exc: object) -> None:
        try:
            if self._span is not None:
                self._span.__exit__(*exc)  # type: ignore[arg-type]
        finally:
            _FETCH.reset(self._token)
