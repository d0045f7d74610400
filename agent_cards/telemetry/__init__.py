"""Telemetry both services run the same way: tracing set-up and the observed HTTP edge.

Each service binds its own names (the ``service.name`` default, the attribute prefix, the
access logger) and its own metrics in its ``telemetry`` package; the mechanics live here
once, beside :mod:`agent_cards.edge` and :mod:`agent_cards.telemetry.logs`, importing neither
service.

* :mod:`agent_cards.telemetry.tracing`: one OpenTelemetry provider per service, configured
  from the standard ``OTEL_*`` variables, and W3C Trace Context on the wire;
* :mod:`agent_cards.telemetry.http`: the ASGI middleware that gives each request its
  server span, its access log line and its latency.
"""

__all__: list[str] = []
