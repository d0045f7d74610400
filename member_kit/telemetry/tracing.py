"""A member's tracing: its provider and names, over the shared set-up.

The mechanics (the standard ``OTEL_*`` variables, exporters, W3C Trace Context) are
:mod:`agent_cards.telemetry.tracing`, shared with the coordinator. Here a member gets its
``service.name`` default and instrumentation from its names
(:mod:`member_kit.telemetry.names`: ``remote-risk`` for remote_risk, ``legal-terms`` for
the legal team's member); a caller without ``traceparent`` still starts a trace that the
decision log and access log name.

A tracer provider holds the exporters and their threads, so a process has one per
service name (:func:`tracing_for`), looked up when an app is built, never per request:
two apps of one member in a process share it, apps of different members do not.
:data:`service_tracing` is remote_risk's.
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
from member_kit.telemetry.names import REMOTE_RISK, TelemetryNames

_PROVIDERS: dict[str, ServiceTracing] = {}


def tracing_for(names: TelemetryNames) -> ServiceTracing:
    """The process's tracing for the service ``names`` name, made on first use."""
    found = _PROVIDERS.get(names.service_name)
    if found is None:
        found = ServiceTracing(names.service_name, names.instrumentation)
        _PROVIDERS[names.service_name] = found
    return found


DEFAULT_SERVICE_NAME = REMOTE_RISK.service_name
PREFIX = REMOTE_RISK.span_prefix
INSTRUMENTATION = REMOTE_RISK.instrumentation

service_tracing = tracing_for(REMOTE_RISK)
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
    "tracing_for",
]
