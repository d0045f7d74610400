"""What the coordinator tells its operators about itself: traces, logs and metrics.

A low layer (only :mod:`coordinator.errors` is below it), so every other layer may open a
span, count something or log. :mod:`~coordinator.telemetry.tracing` is OpenTelemetry with
W3C Trace Context, :mod:`~coordinator.telemetry.logs` the one logging set-up,
:mod:`~coordinator.telemetry.metrics` the Prometheus registry and
:mod:`~coordinator.telemetry.http` the ASGI middleware that ties them to each request.
The mechanics shared with remote_risk (the provider set-up, the observed HTTP edge, the
log formatter) are in :mod:`agent_cards.telemetry` and :mod:`agent_cards.telemetry.logs`; here
the coordinator binds its names and keeps its own metrics.
"""

__all__: list[str] = []
