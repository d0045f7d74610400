"""What remote_risk tells its operators about itself: traces, logs and metrics.

The risk team's own module (it imports nothing of the coordinator): OpenTelemetry tracing
that continues a caller's W3C ``traceparent`` (:mod:`~member_kit.telemetry.tracing`), the
one logging set-up (:mod:`~member_kit.telemetry.logs`), the Prometheus registry
(:mod:`~member_kit.telemetry.metrics`) and the ASGI middleware that ties them to each
request (:mod:`~member_kit.telemetry.http`). The mechanics shared with the coordinator
(provider set-up, observed HTTP edge, log formatter) are in :mod:`agent_cards.telemetry`
and :mod:`agent_cards.telemetry.logs`, which import neither service.
"""

__all__: list[str] = []
