"""Tracing: one OpenTelemetry tracer provider per service, W3C Trace Context on the wire.

Each service holds its own :class:`ServiceTracing` (not the process-global provider), so a
test process that hosts both services keeps their spans apart by ``service.name``. It is
configured from the standard variables: ``OTEL_SERVICE_NAME`` (default: the service's
own name), ``OTEL_TRACES_EXPORTER`` (``console``, ``otlp``, ``none``, or a comma list; when
unset, ``otlp`` if ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is
set, else nothing is exported), ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf`` by
default, or ``grpc``), ``OTEL_TRACES_SAMPLER`` and ``OTEL_SDK_DISABLED``. Spans are made even
when nothing exports them, so that every request has a real trace id and every outgoing
A2A request carries ``traceparent`` (such spans record nothing: see
:class:`ServiceTracing`); ``OTEL_SDK_DISABLED=true`` turns tracing off entirely.

Attributes follow the OpenTelemetry semantic conventions where they exist (HTTP, RPC); a
service names its own under its prefix. Never put a token, a payload or an artifact in one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagators.textmap import DefaultGetter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "CONTEXT_HEADERS",
    "Attribute",
    "ServiceTracing",
    "annotate",
    "current_trace_id",
    "disabled",
    "exporter_names",
    "exporter_processor",
    "extract",
    "inject",
    "inject_for",
]

Attribute = str | bool | int | float
_propagator = TraceContextTextMapPropagator()
# The headers :func:`extract` reads, as an ASGI server names them (bytes, lower case).
CONTEXT_HEADERS = frozenset(name.encode("latin-1") for name in _propagator.fields)
_getter: DefaultGetter = DefaultGetter()
_ids = RandomIdGenerator()
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
# What an internal step runs in when nobody receives spans (reusable, records nothing).
_NO_SPAN = nullcontext(trace.INVALID_SPAN)


def disabled(env: Mapping[str, str] = os.environ) -> bool:
    return env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def exporter_names(env: Mapping[str, str] = os.environ) -> list[str]:
    """Which exporters the environment asks for (``none`` or nothing: none)."""
    named = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
    named = [n for n in named if n]
    if not named:
        endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        return ["otlp"] if any(env.get(name) for name in endpoints) else []
    return [n for n in named if n != "none"]


def _one_line(span: ReadableSpan) -> str:
    return span.to_json(indent=None) + "\n"


def exporter_processor(name: str, env: Mapping[str, str]) -> SpanProcessor:
    """The processor for one named exporter; console spans go to stderr, one per line
    (stdout belongs to the command's output and the servers' first line)."""
    if name == "console":
        return SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr, formatter=_one_line))
    if name == "otlp":
        return BatchSpanProcessor(_otlp_exporter(env))
    raise ValueError(f"OTEL_TRACES_EXPORTER names an unknown exporter {name!r}")


def _otlp_exporter(env: Mapping[str, str]) -> SpanExporter:
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    if protocol.strip().lower() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HTTPSpanExporter,
    )

    return HTTPSpanExporter()


class ServiceTracing:
    """One service's tracer provider, built from the environment on first use.

    A span nobody receives (no exporter configured, no processor added, no sampler
    named) is not recorded: its context is still made from its parent's (or a fresh trace
    id, sampled), made current and propagated, so trace ids join up across the hop and
    every log line names its trace, but no attributes are kept and nothing is processed
    when it ends. Adding a processor (an exporter, or a test's in-memory one) makes the
    spans recorded from then on.
    """

    def __init__(self, default_service_name: str, instrumentation: str) -> None:
        self.default_service_name = default_service_name
        self.instrumentation = instrumentation
        self._provider: trace.TracerProvider | None = None
        self._tracer: trace.Tracer | None = None
        self._unheard = False

    def build_provider(self, env: Mapping[str, str] = os.environ) -> trace.TracerProvider:
        """A provider configured from ``env`` (see the module's docstring)."""
        if disabled(env):
            return trace.NoOpTracerProvider()
        name = env.get("OTEL_SERVICE_NAME") or self.default_service_name
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
        for exporter in exporter_names(env):
            provider.add_span_processor(exporter_processor(exporter, env))
        return provider

    def provider(self) -> trace.TracerProvider:
        if self._provider is None:
            self._adopt(self.build_provider(), os.environ)
        assert self._provider is not None
        return self._provider

    def configure(self, env: Mapping[str, str] = os.environ) -> trace.TracerProvider:
        """Rebuild the provider from ``env`` (a process's entry point, or a test)."""
        old = self._provider
        self._adopt(self.build_provider(env), env)
        if isinstance(old, TracerProvider):
            old.shutdown()
        assert self._provider is not None
        return self._provider

    def _adopt(self, provider: trace.TracerProvider, env: Mapping[str, str]) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer(self.instrumentation)
        self._unheard = (
            isinstance(provider, TracerProvider)
            and not exporter_names(env)
            and not env.get("OTEL_TRACES_SAMPLER", "").strip()
        )

    def add_span_processor(self, processor: SpanProcessor) -> None:
        """Send this service's spans to ``processor`` too (an in-memory exporter in tests)."""
        current = self.provider()
        if isinstance(current, TracerProvider):
            current.add_span_processor(processor)
            self._unheard = False

    def tracer(self) -> trace.Tracer:
        if self._tracer is None:
            self.provider()
        assert self._tracer is not None
        return self._tracer

    def internal_span(
        self, name: str, attributes: Mapping[str, Attribute | None] | None = None
    ) -> AbstractContextManager[trace.Span]:
        """:meth:`span` around an internal step whose context nothing propagates: when
        nobody receives spans it costs nothing (no span is made: the block is given the
        invalid span, which records nothing, and the enclosing one stays current, so logs
        still name its trace)."""
        self.tracer()
        if self._unheard:
            return _NO_SPAN
        return self.span(name, attributes)

    def start_span(
        self,
        name: str,
        attributes: Mapping[str, Attribute | None] | None = None,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> trace.Span:
        """A span under the current one, started but not made current; the caller ends it
        (a stream's span, whose context goes into the stream's request headers)."""
        tracer = self.tracer()
        if self._unheard:
            return _unrecorded_span(None)
        given = {key: value for key, value in (attributes or {}).items() if value is not None}
        return tracer.start_span(name, kind=kind, attributes=given)

    @contextmanager
    def span(
        self,
        name: str,
        attributes: Mapping[str, Attribute | None] | None = None,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        parent: otel_context.Context | None = None,
        links: Sequence[Link] = (),
    ) -> Iterator[trace.Span]:
        """A span around a step; ``None`` attributes are left out. An exception escaping it
        is recorded with its type only (its message might quote what it was about)."""
        tracer = self.tracer()
        if self._unheard:
            if parent is None and kind is SpanKind.INTERNAL and _inside_a_span():
                # a step nobody hears: ids of its own, but the request's span stays current
                # (what the step sends onward names that span, as unheard as its own)
                yield _unrecorded_span(None)
                return
            # made current without use_span's wrapping: this span records nothing
            unheard = _unrecorded_span(parent)
            token = otel_context.attach(trace.set_span_in_context(unheard))
            try:
                yield unheard
            finally:
                otel_context.detach(token)
            return
        given = {key: value for key, value in (attributes or {}).items() if value is not None}
        with tracer.start_as_current_span(
            name,
            context=parent,
            kind=kind,
            attributes=given,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        ) as current:
            try:
                yield current
            except BaseException as exc:
                current.set_attribute("error.type", type(exc).__name__)
                raise


def _unrecorded_span(parent: otel_context.Context | None) -> trace.Span:
    """A span that records nothing: the parent's trace (or a fresh, sampled one), a span
    id of its own, the parent's flags and state (as the default ``ParentBased`` would)."""
    above = trace.get_current_span(parent).get_span_context()
    if above.is_valid:
        trace_id, flags, state = above.trace_id, above.trace_flags, above.trace_state
    else:
        trace_id, flags, state = _ids.generate_trace_id(), _SAMPLED, None
    return NonRecordingSpan(SpanContext(trace_id, _ids.generate_span_id(), False, flags, state))


def _inside_a_span() -> bool:
    return trace.get_current_span().get_span_context().is_valid


def annotate(**attributes: Attribute | None) -> None:
    """Set attributes on the current span (if one is recording)."""
    current = trace.get_current_span()
    if current.is_recording():
        for key, value in attributes.items():
            if value is not None:
                current.set_attribute(key, value)


def inject(headers: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Add ``traceparent`` (and ``tracestate``) for the current span to ``headers``."""
    _propagator.inject(headers)
    return headers


def inject_for(span: trace.Span, headers: MutableMapping[str, str]) -> None:
    """Add ``traceparent`` for ``span`` (not necessarily the current one) to ``headers``."""
    _propagator.inject(headers, context=trace.set_span_in_context(span))


def extract(headers: Mapping[str, str]) -> otel_context.Context:
    """The context an incoming request's ``traceparent`` names (empty if none or invalid)."""
    return _propagator.extract(headers, getter=_getter)


def current_trace_id() -> str | None:
    """The current span's trace id as 32 lowercase hex digits, or None outside any span."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None
