"""The coordinator's tracing: its provider and names, over the shared set-up.

The mechanics (the standard ``OTEL_*`` variables, exporters, W3C Trace Context) are
:mod:`agent_cards.telemetry.tracing`, shared with remote_risk. Here the coordinator binds
its ``service.name`` default (``coordinator``), its attribute prefix and the run's trace:
every run has a real trace id and every A2A request carries ``traceparent``; with
``OTEL_SDK_DISABLED=true`` a run's trace id is a fresh random one and nothing is propagated.
"""

from __future__ import annotations

import uuid

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from agent_cards.telemetry.tracing import (
    Attribute,
    ServiceTracing,
    annotate,
    current_trace_id,
    disabled,
    exporter_names,
    exporter_processor,
    extract,
    inject,
    inject_for,
)

DEFAULT_SERVICE_NAME = "coordinator"
PREFIX = "federation."
INSTRUMENTATION = "coordinator"

service_tracing = ServiceTracing(DEFAULT_SERVICE_NAME, INSTRUMENTATION)
build_provider = service_tracing.build_provider
provider = service_tracing.provider
configure = service_tracing.configure
add_span_processor = service_tracing.add_span_processor
tracer = service_tracing.tracer
span = service_tracing.span

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "INSTRUMENTATION",
    "PREFIX",
    "Attribute",
    "add_span_processor",
    "annotate",
    "build_provider",
    "configure",
    "current_trace_id",
    "disabled",
    "exporter_names",
    "exporter_processor",
    "extract",
    "inject",
    "inject_for",
    "provider",
    "run_context",
    "service_tracing",
    "span",
    "trace_id_for_new_run",
    "tracer",
]


def trace_id_for_new_run() -> str:
    """The trace a run starting now belongs to: the current one, else a fresh id."""
    return current_trace_id() or uuid.uuid4().hex


def run_context(trace_id: str | None) -> otel_context.Context | None:
    """A parent context in the run's trace, for work on a run outside the span that started
    it (a worker driving a submitted handoff, a restarted coordinator recovering one).
    None when the current span already is in that trace, or the id is not a trace id."""
    if trace_id is None or trace_id == current_trace_id():
        return None
    try:
        value = int(trace_id, 16)
    except ValueError:
        return None
    if len(trace_id) != 32 or value == 0:
        return None
    parent = SpanContext(
        trace_id=value,
        span_id=int(uuid.uuid4().hex[:16], 16) or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))
