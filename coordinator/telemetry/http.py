"""The coordinator's observed HTTP edge: the shared middleware bound to its names and metrics.

Each request gets a server span (continuing the caller's ``traceparent``), an access log
line on ``coordinator.access`` (INFO) and its latency; inner code adds what only it knows with
:func:`note` (a denial reason). The mechanics are :mod:`agent_cards.telemetry.http`.
"""

from __future__ import annotations

import logging

from agent_cards.telemetry import http as observed
from agent_cards.telemetry.http import RequestFacts
from coordinator.telemetry import metrics, tracing

__all__ = ["ACCESS_LOGGER", "ObservedHTTP", "access_logger", "note"]

ACCESS_LOGGER = "coordinator.access"
access_logger = logging.getLogger(ACCESS_LOGGER)
_facts = RequestFacts("coordinator_request_facts", tracing.PREFIX)
note = _facts.note


class ObservedHTTP(observed.ObservedHTTP):
    """Span, access log and latency histogram for each HTTP request to The coordinator."""

    tracing = tracing.service_tracing
    facts = _facts
    access_logger = access_logger

    def record_metrics(
        self, method: str, route: str, status: int, seconds: float, facts: dict[str, str]
    ) -> None:
        metrics.HTTP_REQUESTS.labels(method, route, str(status)).observe(seconds)
