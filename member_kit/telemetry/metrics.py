"""remote_risk's Prometheus metrics, on a registry of its own.

Names carry their unit and every label has a bounded set of values (A2A method names,
reason codes, task states, route templates); never a task, token or caller id.
:func:`exposition` is what ``GET /metrics`` answers with (the Prometheus text format).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from agent_cards.telemetry import metrics as shared
from agent_cards.telemetry.metrics import LATENCY_BUCKETS, known_label

REGISTRY = CollectorRegistry(auto_describe=True)
CONTENT_TYPE = shared.CONTENT_TYPE

HTTP_REQUESTS = Histogram(
    "remote_risk_http_request_duration_seconds",
    "HTTP requests, by method, route template and status.",
    ["method", "route", "status"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
A2A_REQUESTS = Counter(
    "remote_risk_a2a_requests_total",
    "A2A JSON-RPC requests, by method and outcome (ok, or the JSON-RPC error's reason).",
    ["method", "outcome"],
    registry=REGISTRY,
)
IGNORED_FIELDS = Counter(
    "remote_risk_ignored_fields_total",
    "Request members not defined by the protocol, ignored (not refused), by binding.",
    ["binding"],
    registry=REGISTRY,
)
TOKEN_DECISIONS = Counter(
    "remote_risk_token_decisions_total",
    "Delegation-token decisions, by A2A method and result (allowed or denied).",
    ["method", "result"],
    registry=REGISTRY,
)
TOKEN_REFUSALS = Counter(
    "remote_risk_token_refusals_total",
    "Delegation tokens refused, by denial reason.",
    ["reason"],
    registry=REGISTRY,
)
UNAUTHENTICATED_REFUSALS = Counter(
    "remote_risk_unauthenticated_refusals_total",
    "Requests refused before any known issuer's key verified their token (counted, not"
    " entered in the decision log), by denial reason.",
    ["reason"],
    registry=REGISTRY,
)
GRPC_CONNECTIONS_REFUSED = Counter(
    "remote_risk_grpc_connections_refused_total",
    "Connections to the gRPC port refused before gRPC saw them, by reason"
    " (too_many_client_connections, too_many_connections).",
    ["reason"],
    registry=REGISTRY,
)
SKILL_SECONDS = Histogram(
    "remote_risk_skill_duration_seconds",
    "Skill work per task, by skill and outcome.",
    ["skill", "outcome"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
PUSH_DELIVERIES = Counter(
    "remote_risk_push_deliveries_total",
    "Push notification deliveries, by outcome.",
    ["outcome"],
    registry=REGISTRY,
)

# The children of the metrics every request counts, kept (see shared.children).
http_requests = shared.children(HTTP_REQUESTS)
a2a_requests = shared.children(A2A_REQUESTS)
token_decisions = shared.children(TOKEN_DECISIONS)
skill_seconds = shared.children(SKILL_SECONDS)

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


def exposition() -> bytes:
    return shared.exposition(REGISTRY)
