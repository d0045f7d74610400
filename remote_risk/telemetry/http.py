"""The ASGI middleware that observes every HTTP request: its span, access log line and
latency.

The request's span continues the caller's trace when it sends ``traceparent`` (an operator's
tool, a gateway) and starts a new one otherwise. Inner code adds what only it knows with
:func:`note` (the A2A method, a denial reason); the access log line (logger
``remote_risk.access``, INFO) then has method, path, route, status, duration, client,
trace id and those facts. Never a header value or a body.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from typing import Any

from opentelemetry.trace import SpanKind
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from remote_risk.telemetry import metrics, tracing

ACCESS_LOGGER = "remote_risk.access"
access_logger = logging.getLogger(ACCESS_LOGGER)
_facts: ContextVar[dict[str, str] | None] = ContextVar("remote_risk_request_facts", default=None)


def note(**facts: str | None) -> None:
    """Add facts about the request being served to its access log line and its span."""
    given = {key: value for key, value in facts.items() if value is not None}
    current = _facts.get()
    if current is not None:
        current.update(given)
    tracing.annotate(**{tracing.PREFIX + key: value for key, value in given.items()})


def route_of(scope: Scope) -> str:
    """The matched route's template (a bounded label), or ``unmatched``."""
    route = scope.get("route")
    if route is None and "endpoint" in scope:
        routes = getattr(scope.get("router"), "routes", ())
        route = next((r for r in routes if getattr(r, "endpoint", None) is scope["endpoint"]), None)
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


def client_of(scope: Scope) -> str | None:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None


class ObservedHTTP:
    """Span, access log and latency histogram for each HTTP request to ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        facts: dict[str, str] = {}
        reset = _facts.set(facts)
        status = {"code": 500}
        method, started = scope["method"], time.perf_counter()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            with tracing.span(
                method,
                {
                    "http.request.method": method,
                    "url.path": scope["path"],
                    "url.scheme": scope.get("scheme"),
                    "client.address": (scope.get("client") or (None,))[0],
                },
                kind=SpanKind.SERVER,
                parent=tracing.extract(headers),
            ) as span:
                try:
                    await self.app(scope, receive, sending)
                finally:
                    route = route_of(scope)
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                    span.set_attribute("http.response.status_code", status["code"])
                    trace_id = tracing.current_trace_id()
                    self._record(scope, route, status["code"], started, trace_id, facts)
        finally:
            _facts.reset(reset)

    def _record(
        self,
        scope: Scope,
        route: str,
        status: int,
        started: float,
        trace_id: str | None,
        facts: dict[str, str],
    ) -> None:
        seconds = time.perf_counter() - started
        method = scope["method"]
        metrics.HTTP_REQUESTS.labels(method, route, str(status)).observe(seconds)
        if "a2a_method" in facts:
            outcome = facts.get("a2a_error", "ok")
            metrics.A2A_REQUESTS.labels(metrics.method_label(facts["a2a_method"]), outcome).inc()
        fields: dict[str, Any] = {
            "method": method,
            "path": scope["path"],
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
            "client": client_of(scope),
            "trace_id": trace_id,
            **facts,
        }
        access_logger.info(
            "%s %s %d %.1fms",
            method,
            scope["path"],
            status,
            seconds * 1000,
            extra={"fields": fields},
        )
