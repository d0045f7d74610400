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
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags

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
internal_span = service_tracing.internal_span
start_span = service_tracing.start_span

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "INSTRUMENTATION",
    "PREFIX",
    "Attribute",
    "add_span_processor",
    "annotate",
    "build_provider",
    "configure",
    "current_span_id",
    "current_trace_id",
    "disabled",
    "exporter_names",
    "exporter_processor",
    "extract",
    "inject",
    "inject_for",
    "internal_span",
    "provider",
    "run_parent",
    "run_span_context",
    "service_tracing",
    "span",
    "start_span",
    "trace_id_for_new_run",
    "tracer",
]


def trace_id_for_new_run() -> str:
    """The trace a run starting now belongs to: the current one, else a fresh id."""
    return current_trace_id() or uuid.uuid4().hex


def current_span_id() -> str | None:
    """The current span's id as 16 lowercase hex digits, or None outside any span."""
    context = trace.get_current_span().get_span_context()
    return format(context.span_id, "016x") if context.is_valid else None


def run_span_context(trace_id: str | None, span_id: str | None = None) -> SpanContext | None:
    """The span context of the span a run started in (``span_id``, kept with the run), for
    work on the run outside that span (a worker driving a submitted handoff, a restarted
    coordinator recovering one); None when the current span already is in the run's
    trace, or the ids are not ids. Without ``span_id`` (a run stored before it was kept)
    the parent is a stand-in span of the run's trace, so the work still joins the trace."""
    if trace_id is None or trace_id == current_trace_id():
        return None
    trace_value, span_value = _hex(trace_id, 32), _hex(span_id, 16) if span_id else None
    if trace_value is None:
        return None
    return SpanContext(
        trace_id=trace_value,
        span_id=span_value or int(uuid.uuid4().hex[:16], 16) or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def run_parent(
    trace_id: str | None, span_id: str | None = None
) -> tuple[otel_context.Context | None, list[Link]]:
    """The parent context for work on a run outside its span, and a link to the span the
    run started in (when it is known): the work hangs under that span in the run's trace
    and names it the conventional way too (see :func:`run_span_context`)."""
    parent = run_span_context(trace_id, span_id)
    if parent is None:
        return None, []
    links = [Link(parent, {PREFIX + "link": "run"})] if span_id else []
    return trace.set_span_in_context(NonRecordingSpan(parent)), links


def _hex(value: str, digits: int) -> int | None:
    try:
        number = int(value, 16)
    except ValueError:
        return None
    return number if len(value) == digits and number != 0 else None
