"""The ASGI middleware that observes every HTTP request: its span, access log line and
latency.

The request's span continues the caller's trace when it sends ``traceparent`` (an operator's
tool, a gateway, the other team's service) and starts a new one otherwise. Inner code adds
what only it knows with :meth:`RequestFacts.note` (the A2A method, a denial reason); the
access log line (INFO, on the service's access logger) then has method, path, route,
status, duration, client, trace id and those facts. Never a header value or a body.

A service subclasses :class:`ObservedHTTP` to bind its tracing, its facts, its logger and
the metrics it keeps per request (:meth:`ObservedHTTP.record_metrics`), as class
attributes or, for one app among several in a process, per instance.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_cards.telemetry.tracing import (
    CONTEXT_HEADERS,
    ServiceTracing,
    current_trace_id,
    extract,
)

__all__ = ["ObservedHTTP", "RequestFacts", "client_of", "route_of", "trace_headers"]


class RequestFacts:
    """What inner code knows about the request being served, for its log line and span."""

    def __init__(self, name: str, prefix: str) -> None:
        self.prefix = prefix
        self.current: ContextVar[dict[str, str] | None] = ContextVar(name, default=None)

    def note(self, **facts: str | None) -> None:
        """Add facts about the request being served to its access log line and its span."""
        given = {key: value for key, value in facts.items() if value is not None}
        current = self.current.get()
        if current is not None:
            current.update(given)
        span = trace.get_current_span()
        if span.is_recording():  # the prefixed names are made only for a span that keeps them
            for key, value in given.items():
                span.set_attribute(self.prefix + key, value)


def route_of(scope: Scope) -> str:
    """The matched route's template (a bounded label), or ``unmatched``."""
    route = scope.get("route")
    if route is None and "endpoint" in scope:
        routes = getattr(scope.get("router"), "routes", ())
        route = next((r for r in routes if getattr(r, "endpoint", None) is scope["endpoint"]), None)
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


def trace_headers(scope: Scope) -> dict[str, str]:
    """The request's headers :func:`extract` reads (the last of each, as a dict of all its
    headers would keep), without decoding the others."""
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in scope["headers"]
        if name in CONTEXT_HEADERS
    }


def client_of(scope: Scope) -> str | None:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None


class ObservedHTTP:
    """Span, access log and per-request metrics for each HTTP request to ``app``."""

    # Bound by the subclass (a service's class attributes) or per instance (one app's).
    tracing: ServiceTracing
    facts: RequestFacts
    access_logger: logging.Logger

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def record_metrics(
        self, method: str, route: str, status: int, seconds: float, facts: dict[str, str]
    ) -> None:
        """Count one finished request (the service's own metrics)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        facts: dict[str, str] = {}
        reset = self.facts.current.set(facts)
        status = {"code": 500}
        method, started = scope["method"], time.perf_counter()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            with self.tracing.span(
                method,
                {
                    "http.request.method": method,
                    "url.path": scope["path"],
                    "url.scheme": scope.get("scheme"),
                    "client.address": (scope.get("client") or (None,))[0],
                },
                kind=SpanKind.SERVER,
                parent=extract(trace_headers(scope)),
            ) as span:
                try:
                    await self.app(scope, receive, sending)
                finally:
                    route = route_of(scope)
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                    span.set_attribute("http.response.status_code", status["code"])
                    self._record(scope, route, status["code"], started, facts)
        finally:
            self.facts.current.reset(reset)

    def _record(
        self, scope: Scope, route: str, status: int, started: float, facts: dict[str, str]
    ) -> None:
        seconds = time.perf_counter() - started
        method = scope["method"]
        self.record_metrics(method, route, status, seconds, facts)
        fields: dict[str, Any] = {
            "method": method,
            "path": scope["path"],
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
            "client": client_of(scope),
            "trace_id": current_trace_id(),
            **facts,
        }
        self.access_logger.info(
            "%s %s %d %.1fms",
            method,
            scope["path"],
            status,
            seconds * 1000,
            extra={"fields": fields},
        )
