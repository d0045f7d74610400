"""What a member tells its operators about itself: traces, logs and metrics.

The kit's own module (it imports nothing of the coordinator). Each member app reports
under its member's own names (:mod:`~member_kit.telemetry.names`: metrics ``BASE_*``,
spans ``BASE.*``, ``service.name`` ``BASE`` with ``-``, the ``BASE.access`` logger,
``UPPER_BASE_*`` variables; remote_risk's base is ``remote_risk``, so its names are the
ones it always had) through one object built with the app,
:class:`~member_kit.telemetry.observed.Telemetry`: its own Prometheus registry
(:mod:`~member_kit.telemetry.metrics`), its service's OpenTelemetry tracing that
continues a caller's W3C ``traceparent`` (:mod:`~member_kit.telemetry.tracing`), and the
ASGI middleware that ties them to each request (:mod:`~member_kit.telemetry.http`). The
logging set-up is :mod:`~member_kit.telemetry.logs`. The mechanics shared with the
coordinator (provider set-up, observed HTTP edge, log formatter) are in
:mod:`agent_cards.telemetry`, which imports neither service.
"""

__all__: list[str] = []
