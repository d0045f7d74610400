"""What a member tells its operators about itself: traces, logs and metrics.

The kit's own module (it imports nothing of the coordinator): OpenTelemetry tracing that
continues a caller's W3C ``traceparent`` (:mod:`~member_kit.telemetry.tracing`), the one
logging set-up (:mod:`~member_kit.telemetry.logs`), the Prometheus registry
(:mod:`~member_kit.telemetry.metrics`) and the ASGI middleware that ties them to each
request (:mod:`~member_kit.telemetry.http`). The mechanics shared with the coordinator
(provider set-up, observed HTTP edge, log formatter) are in :mod:`agent_cards.telemetry`,
which imports neither service.

Names: every member on the kit (remote_risk, the guard, an a2a-sdk agent in-process)
still reports under the names remote_risk had when it was the only member: metrics
``remote_risk_*``, spans ``remote_risk.*``, the ``remote_risk.access`` logger and the
``REMOTE_RISK_*`` variables; a service's own name in their place is still to come.
"""

__all__: list[str] = []
