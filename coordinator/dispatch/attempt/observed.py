"""The spans and counts of one handoff attempt's steps (see
:mod:`~coordinator.dispatch.attempt.driver`).

A handoff's span is in its run's trace even when it is driven outside the span that
started the run (a worker, a restarted coordinator): :func:`~coordinator.telemetry.tracing.
run_parent` makes that span its parent and links to it. Attributes name the handoff by
its ids, the target and skill, and verdicts by their reason codes; never the payload, the
artifact or the token.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace

from contracts.handoff import HandoffRecord
from coordinator.telemetry import metrics, tracing

P = tracing.PREFIX


def record_attributes(record: HandoffRecord) -> dict[str, tracing.Attribute | None]:
    return {
        P + "run_id": record.run_id,
        P + "handoff_id": record.handoff_id,
        P + "attempt": record.attempt,
        P + "target": record.target,
        P + "skill": record.skill,
        P + "remote_task_id": record.remote_task_id,
    }


@contextmanager
def step(name: str, record: HandoffRecord) -> Iterator[None]:
    """A span around one step of the attempt, named ``federation.<name>`` (none when
    nobody receives spans)."""
    with tracing.internal_span(P + name, record_attributes(record)):
        yield


@contextmanager
def handoff(
    record: HandoffRecord, trace_id: str | None, run_span_id: str | None = None
) -> Iterator[trace.Span]:
    """The span of driving one attempt, counted in flight while it lasts."""
    metrics.IN_FLIGHT.inc()
    parent, links = tracing.run_parent(trace_id, run_span_id)
    try:
        with tracing.span(
            P + "handoff", record_attributes(record), parent=parent, links=links
        ) as span:
            yield span
    finally:
        metrics.IN_FLIGHT.dec()


def ended(span: trace.Span, record: HandoffRecord) -> None:
    """Note where the attempt ended, on its span and, if terminal, in the counts."""
    span.set_attribute(P + "state", record.state.value)
    if record.reason:
        span.set_attribute(P + "reason", record.reason)
    if record.remote_task_id:
        span.set_attribute(P + "remote_task_id", record.remote_task_id)
    if record.terminal:
        metrics.handoff_ended(record.state.value, record.reason)


def verdict(admitted: bool, reason: str | None, decision: str | None = None) -> None:
    tracing.annotate(
        **{
            P + "admission.verdict": "admitted" if admitted else "refused",
            P + "admission.reason": reason,
            P + "admission.decision": decision,
        }
    )


def denied(predicate: str, record: HandoffRecord) -> None:
    """An admission denial: counted by its predicate, and the handoff by where it ended."""
    metrics.ADMISSION_DENIALS.labels(metrics.bounded_reason(predicate)).inc()
    if record.terminal:
        metrics.handoff_ended(record.state.value, record.reason)


def grant_refused(reason: str) -> None:
    tracing.annotate(**{P + "denial_reason": reason})
    metrics.GRANT_REFUSALS.labels(metrics.bounded_reason(reason)).inc()


def taken_over() -> None:
    metrics.LEASE_TAKEOVERS.inc()
