"""remote_risk's observed HTTP edge: the shared middleware bound to its names and metrics.

Each request gets a server span (continuing the caller's ``traceparent``), an access log
line on ``remote_risk.access`` (INFO) and its latency; inner code adds what only it knows
with :func:`note` (the A2A method, its error, a denial reason). The mechanics are
:mod:`agent_cards.telemetry.http`.
"""

from __future__ import annotations

import logging

from agent_cards.telemetry import http as observed
from agent_cards.telemetry.http import RequestFacts
from remote_risk.telemetry import metrics, tracing

__all__ = ["ACCESS_LOGGER", "ObservedHTTP", "access_logger", "note"]

ACCESS_LOGGER = "remote_risk.access"
access_logger = logging.getLogger(ACCESS_LOGGER)
_facts = RequestFacts("remote_risk_request_facts", tracing.PREFIX)
note = _facts.note


class ObservedHTTP(observed.ObservedHTTP):
    """Span, access log and latency histogram for each HTTP request to remote_risk."""

    tracing = tracing.service_tracing
    facts = _facts
    access_logger = access_logger

    def record_metrics(
        self, method: str, route: str, status: int, seconds: float, facts: dict[str, str]
    ) -> None:
        metrics.HTTP_REQUESTS.labels(method, route, str(status)).observe(seconds)
        if "a2a_method" in facts:
            outcome = facts.get("a2a_error", "ok")
            metrics.A2A_REQUESTS.labels(metrics.method_label(facts["a2a_method"]), outcome).inc()
