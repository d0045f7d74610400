"""remote_risk's observed HTTP edge: the shared middleware bound to its names and metrics.

Each request gets a server span (continuing the caller's ``traceparent``), an access log
line on ``remote_risk.access`` (INFO) and its latency; inner code adds what only it knows
with :func:`note` (the A2A method, its error, a denial reason). The mechanics are
:mod:`agent_cards.telemetry.http`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry.trace import SpanKind

from agent_cards.telemetry import http as observed
from agent_cards.telemetry.http import RequestFacts
from agent_cards.telemetry.tracing import current_trace_id, extract
from member_kit.telemetry import metrics, tracing

__all__ = ["ACCESS_LOGGER", "ObservedHTTP", "access_logger", "in_request", "note", "observed_rpc"]

ACCESS_LOGGER = "remote_risk.access"
access_logger = logging.getLogger(ACCESS_LOGGER)
_facts = RequestFacts("remote_risk_request_facts", tracing.PREFIX)
note = _facts.note


def in_request() -> bool:
    """Whether an HTTP request (or a gRPC call) is being served: its access line will be
    written, with whatever is noted."""
    return _facts.current.get() is not None


class ObservedHTTP(observed.ObservedHTTP):
    """Span, access log and latency histogram for each HTTP request to remote_risk."""

    tracing = tracing.service_tracing
    facts = _facts
    access_logger = access_logger

    def record_metrics(
        self, method: str, route: str, status: int, seconds: float, facts: dict[str, str]
    ) -> None:
        metrics.http_requests(method, route, str(status)).observe(seconds)
        if "a2a_method" in facts:
            outcome = facts.get("a2a_error", "ok")
            metrics.a2a_requests(metrics.method_label(facts["a2a_method"]), outcome).inc()


@contextmanager
def observed_rpc(method: str, metadata: Mapping[str, str], peer: str | None) -> Iterator[None]:
    """A gRPC call observed as an HTTP request is: a server span continuing the caller's
    ``traceparent`` (from the call's metadata), the facts inner code notes, its count in
    ``remote_risk_a2a_requests_total`` and an access log line (``GRPC method outcome``)."""
    facts: dict[str, str] = {"a2a_method": method}
    reset = _facts.current.set(facts)
    started = time.perf_counter()
    attributes = {"rpc.system": "grpc", "rpc.method": method, "client.address": peer}
    try:
        with tracing.service_tracing.span(
            f"grpc {method}", attributes, kind=SpanKind.SERVER, parent=extract(metadata)
        ):
            yield
    finally:
        _facts.current.reset(reset)
        outcome = facts.get("a2a_error", "ok")
        metrics.a2a_requests(metrics.method_label(method), outcome).inc()
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
        access_logger.info(
            "GRPC %s %s %.1fms", method, outcome, seconds * 1000, extra={"fields": fields}
        )
