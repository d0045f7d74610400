"""A member app's Prometheus metrics, on a registry of that app's own.

Each app (:func:`member_kit.server.app.create_app`, the guard) builds one
:class:`MemberMetrics`, named by its member (``remote_risk_*`` for remote_risk,
``legal_terms_*`` for the legal team's member; :mod:`member_kit.telemetry.names`), so two
members in one process never count into each other's ``/metrics``.

Names carry their unit and every label has a bounded set of values (A2A method names,
reason codes, task states, route templates); never a task, token or caller id.
:meth:`MemberMetrics.exposition` is what ``GET /metrics`` answers with (the Prometheus
text format).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from agent_cards.telemetry import metrics as shared
from agent_cards.telemetry.metrics import LATENCY_BUCKETS, known_label

CONTENT_TYPE = shared.CONTENT_TYPE

KNOWN_METHODS = frozenset(
    {
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
        "GetExtendedAgentCard",
    }
)


def method_label(method: str | None) -> str:
    """An A2A method name as a label; anything a caller made up is ``other``."""
    return known_label(method, KNOWN_METHODS)


class MemberMetrics:
    """One app's metrics, every name under ``prefix`` (e.g. ``remote_risk_``), in
    ``registry`` (its own)."""

    def __init__(self, prefix: str) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        http_requests = Histogram(
            prefix + "http_request_duration_seconds",
            "HTTP requests, by method, route template and status.",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        a2a_requests = Counter(
            prefix + "a2a_requests_total",
            "A2A JSON-RPC requests, by method and outcome (ok, or the JSON-RPC error's reason).",
            ["method", "outcome"],
            registry=registry,
        )
        self.ignored_fields = Counter(
            prefix + "ignored_fields_total",
            "Request members not defined by the protocol, ignored (not refused), by binding.",
            ["binding"],
            registry=registry,
        )
        token_decisions = Counter(
            prefix + "token_decisions_total",
            "Delegation-token decisions, by A2A method and result (allowed or denied).",
            ["method", "result"],
            registry=registry,
        )
        self.token_refusals = Counter(
            prefix + "token_refusals_total",
            "Delegation tokens refused, by denial reason.",
            ["reason"],
            registry=registry,
        )
        self.unauthenticated_refusals = Counter(
            prefix + "unauthenticated_refusals_total",
            "Requests refused before any known issuer's key verified their token (counted,"
            " not entered in the decision log), by denial reason.",
            ["reason"],
            registry=registry,
        )
        self.grpc_connections_refused = Counter(
            prefix + "grpc_connections_refused_total",
            "Connections to the gRPC port refused before gRPC saw them, by reason"
            " (too_many_client_connections, too_many_connections).",
            ["reason"],
            registry=registry,
        )
        skill_seconds = Histogram(
            prefix + "skill_duration_seconds",
            "Skill work per task, by skill and outcome.",
            ["skill", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.push_deliveries = Counter(
            prefix + "push_deliveries_total",
            "Push notification deliveries, by outcome.",
            ["outcome"],
            registry=registry,
        )
        # The children of the metrics every request counts, kept (see shared.children).
        self.http_requests = shared.children(http_requests)
        self.a2a_requests = shared.children(a2a_requests)
        self.token_decisions = shared.children(token_decisions)
        self.skill_seconds = shared.children(skill_seconds)

    def exposition(self) -> bytes:
        return shared.exposition(self.registry)
