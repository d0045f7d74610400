"""remote_risk's tracing: its provider and names, over the shared set-up.

The mechanics (the standard ``OTEL_*`` variables, exporters, W3C Trace Context) are
:mod:`agent_cards.telemetry.tracing`, shared with the coordinator. Here remote_risk binds
its ``service.name`` default (``remote-risk``) and its attribute prefix; a caller without
``traceparent`` still starts a trace that the decision log and access log name.
"""

from __future__ import annotations

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

DEFAULT_SERVICE_NAME = "remote-risk"
PREFIX = "remote_risk."
INSTRUMENTATION = "remote_risk"

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
    "service_tracing",
    "span",
    "tracer",
]
