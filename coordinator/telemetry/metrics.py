"""The coordinator's Prometheus metrics, on a registry of its own.

Names carry their unit (``_seconds``, ``_total``) and every label has a bounded set of
values: states, reason codes, predicate names, A2A method names, a remote's ``host:port``,
model roles. Never a run, handoff, task or token id. :func:`exposition` is what
``GET /metrics`` answers with (the Prometheus text format).
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from agent_cards.telemetry import metrics as shared
from agent_cards.telemetry.metrics import LATENCY_BUCKETS
from agent_cards.telemetry.metrics import code_label as bounded_reason

REGISTRY = CollectorRegistry(auto_describe=True)
CONTENT_TYPE = shared.CONTENT_TYPE

HANDOFFS = Counter(
    "federation_handoffs_total",
    "Handoffs this process drove to a terminal state, by state and reason code (those "
    "other processes drove, a CLI delegate among them, are not counted here: see "
    "federation_handoffs_recorded).",
    ["state", "reason"],
    registry=REGISTRY,
)
IN_FLIGHT = Gauge(
    "federation_handoffs_in_flight",
    "Handoffs this process is driving right now.",
    registry=REGISTRY,
)
ADMISSION_DENIALS = Counter(
    "federation_admission_denials_total",
    "Handoffs this process refused at admission, by the predicate that failed.",
    ["predicate"],
    registry=REGISTRY,
)
GRANT_REFUSALS = Counter(
    "federation_grant_refusals_total",
    "Delegation tokens this process did not mint because they would widen the run's "
    "authority, by reason.",
    ["reason"],
    registry=REGISTRY,
)
REMOTE_CALLS = Histogram(
    "federation_remote_call_duration_seconds",
    "A2A calls this process made to remote agents, by A2A method, target (host:port) and outcome.",
    ["method", "target", "outcome"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
LEASE_TAKEOVERS = Counter(
    "federation_lease_takeovers_total",
    "Handoffs this process stopped driving because another coordinator took them over.",
    registry=REGISTRY,
)
LEDGER_APPENDS = Histogram(
    "federation_ledger_append_duration_seconds",
    "Batched appends to the audit ledger (one transaction each).",
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
LEDGER_EVENTS = Counter(
    "federation_ledger_events_appended_total",
    "Audit events this process appended to the ledger.",
    registry=REGISTRY,
)
LEDGER_LENGTH = Gauge(
    "federation_ledger_chain_length",
    "Events in the ledger's hash chain (its last sequence number), read when scraped.",
    registry=REGISTRY,
)
HANDOFFS_RECORDED = Gauge(
    "federation_handoffs_recorded",
    "Handoffs in the database by their current state, whichever process drove them "
    "(the server, its workers, a CLI delegate); read when scraped.",
    ["state"],
    registry=REGISTRY,
)
MODEL_REQUESTS = Counter(
    "federation_model_requests_total",
    "Requests this process made to a language model, by the role it served and outcome.",
    ["role", "outcome"],
    registry=REGISTRY,
)
MODEL_TOKENS = Counter(
    "federation_model_tokens_total",
    "Tokens a language model reported using for this process, by role and kind (prompt "
    "or completion).",
    ["role", "kind"],
    registry=REGISTRY,
)
HTTP_REQUESTS = Histogram(
    "federation_http_request_duration_seconds",
    "Requests to the coordinator's HTTP API, by method, route template and status.",
    ["method", "route", "status"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)


def observe_remote_call(method: str, target: str, outcome: str, started: float) -> None:
    REMOTE_CALLS.labels(method, target, outcome).observe(time.perf_counter() - started)


def observe_ledger_append(events: int, started: float) -> None:
    LEDGER_APPENDS.observe(time.perf_counter() - started)
    LEDGER_EVENTS.inc(events)


def handoff_ended(state: str, reason: str | None) -> None:
    HANDOFFS.labels(state, bounded_reason(reason)).inc()


def model_request(role: str, outcome: str, prompt: int | None, completion: int | None) -> None:
    MODEL_REQUESTS.labels(bounded_reason(role), bounded_reason(outcome)).inc()
    if prompt:
        MODEL_TOKENS.labels(bounded_reason(role), "prompt").inc(prompt)
    if completion:
        MODEL_TOKENS.labels(bounded_reason(role), "completion").inc(completion)


def recorded_handoffs(counts: dict[str, int]) -> None:
    """The database's handoffs by state, as read at a scrape (a state gone reads 0)."""
    HANDOFFS_RECORDED.clear()
    for state, count in counts.items():
        HANDOFFS_RECORDED.labels(bounded_reason(state)).set(count)


def exposition() -> bytes:
    return shared.exposition(REGISTRY)
