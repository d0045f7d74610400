"""A member app's observed HTTP edge: the shared middleware bound to that app's telemetry.

Each request gets a server span (continuing the caller's ``traceparent``), an access log
line on the member's access logger (``remote_risk.access`` for remote_risk,
``legal_terms.access`` for the legal team's member; INFO) and its latency; inner code adds
what only it knows with :meth:`~member_kit.telemetry.observed.Telemetry.note` (the A2A
method, its error, a denial reason). The mechanics are :mod:`agent_cards.telemetry.http`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry.trace import SpanKind
from starlette.types import ASGIApp

from agent_cards.telemetry import http as observed
from agent_cards.telemetry.tracing import current_trace_id, extract
from member_kit.telemetry.metrics import method_label
from member_kit.telemetry.observed import Telemetry

__all__ = ["ObservedHTTP", "observed_rpc"]


class ObservedHTTP(observed.ObservedHTTP):
    """Span, access log and latency histogram for each HTTP request to one member app."""

    def __init__(self, app: ASGIApp, *, telemetry: Telemetry) -> None:
        super().__init__(app)
        self.tracing = telemetry.tracing
        self.facts = telemetry.facts
        self.access_logger = telemetry.access_logger
        self._metrics = telemetry.metrics

    def record_metrics(
        self, method: str, route: str, status: int, seconds: float, facts: dict[str, str]
    ) -> None:
        self._metrics.http_requests(method, route, str(status)).observe(seconds)
        if "a2a_method" in facts:
            outcome = facts.get("a2a_error", "ok")
            self._metrics.a2a_requests(method_label(facts["a2a_method"]), outcome).inc()


@contextmanager
def observed_rpc(
    telemetry: Telemetry, method: str, metadata: Mapping[str, str], peer: str | None
) -> Iterator[None]:
    """A gRPC call observed as an HTTP request is: a server span continuing the caller's
    ``traceparent`` (from the call's metadata), the facts inner code notes, its count in
    ``<prefix>a2a_requests_total`` and an access log line (``GRPC method outcome``)."""
    facts: dict[str, str] = {"a2a_method": method}
    reset = telemetry.facts.current.set(facts)
    started = time.perf_counter()
    attributes = {"rpc.system": "grpc", "rpc.method": method, "client.address": peer}
    try:
        with telemetry.tracing.span(
            f"grpc {method}", attributes, kind=SpanKind.SERVER, parent=extract(metadata)
        ):
            yield
    finally:
        telemetry.facts.current.reset(reset)
        outcome = facts.get("a2a_error", "ok")
        telemetry.metrics.a2a_requests(method_label(method), outcome).inc()
        seconds = time.perf_counter() - started
        fields = {
            "method": "GRPC",
            "path": method,
            "status": outcome,
            "duration_ms": round(seconds * 1000, 2),
            "client": peer,
            "trace_id": current_trace_id(),
            **facts,
        }
        telemetry.access_logger.info(
            "GRPC %s %s %.1fms", method, outcome, seconds * 1000, extra={"fields": fields}
        )
