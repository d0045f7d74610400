"""Spans and counts of a member service's own steps: the token check before the body, skill
work (deterministic or model-backed) and push delivery.

Decorators and wrappers, so the steps themselves stay as they are. The skill's span names
the skill and the state its outcome leads to, never its input or its finding; the
model-backed skill's span adds the model requests and tokens it used, its grant's model
budget and its failure's reason code, never a prompt, a reply or the model's key; a push
delivery's span names whether it was delivered and after how many attempts, never the
URL's credentials.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from opentelemetry import trace

from contracts.grant import Budget
from member_kit.skill import Outcome, Skill
from member_kit.telemetry import http, metrics, tracing

logger = logging.getLogger(__name__)
P = tracing.PREFIX
Params = ParamSpec("Params")
Result = TypeVar("Result")


@contextmanager
def skill_span(skill_id: str) -> Iterator[Callable[[Outcome], Outcome]]:
    """An immediate skill's run in a span ``<prefix>skill`` (none when nobody receives
    spans: the request's stays current), timed by outcome: the block passes its outcome
    through the function it is given."""
    started, ended = time.perf_counter(), "error"

    def seen(outcome: Outcome) -> Outcome:
        nonlocal ended
        ended = outcome.state.name.lower()
        span.set_attribute(P + "task_state", outcome.state.value)
        return outcome

    try:
        with tracing.service_tracing.internal_span(P + "skill", {P + "skill_id": skill_id}) as span:
            yield seen
    finally:
        metrics.skill_seconds(skill_id, ended).observe(time.perf_counter() - started)


async def skill_later(
    skill: Skill,
    skill_input: Mapping[str, Any],
    *,
    lease_expires_at: int | None,
    budget: Budget | None,
) -> Outcome:
    """A background skill's run in a span ``<prefix>skill``, timed by outcome, with the
    model requests and tokens it reports and its grant's model budget."""
    started, ended = time.perf_counter(), "error"
    attributes: dict[str, tracing.Attribute | None] = {
        P + "skill_id": skill.skill_id,
        P + "skill.model": True,
        P + "model.budget": budget.model_requests if budget is not None else None,
    }
    try:
        with tracing.span(P + "skill", attributes) as span:
            outcome = await skill.run_later(
                skill_input, lease_expires_at=lease_expires_at, budget=budget
            )
            ended = outcome.state.name.lower()
            if span.is_recording():
                _model_outcome(span, outcome)
            return outcome
    finally:
        metrics.skill_seconds(skill.skill_id, ended).observe(time.perf_counter() - started)


def _model_outcome(span: trace.Span, outcome: Outcome) -> None:
    usage = outcome.usage or {}
    span.set_attribute(P + "task_state", outcome.state.value)
    span.set_attribute(P + "model.requests", int(usage.get("requests") or 0))
    tokens = usage.get("totalTokens")
    if type(tokens) is int:
        span.set_attribute(P + "model.total_tokens", tokens)
    code = outcome.data.get("errorCode")
    if isinstance(code, str) and code:
        span.set_attribute(P + "error_code", code)


def checked_before_body(span: trace.Span, reason: str | None) -> None:
    """The verdict of the token check made from the headers alone, on its span."""
    if span.is_recording():
        span.set_attribute(P + "token.verdict", "denied" if reason else "allowed")
        if reason:
            span.set_attribute(P + "denial_reason", reason)


def push_delivery(
    deliver: Callable[Params, Awaitable[Result]],
) -> Callable[Params, Awaitable[Result]]:
    """A push delivery (all its attempts) in a span ``remote_risk.push``."""

    @functools.wraps(deliver)
    async def traced(*args: Params.args, **kwargs: Params.kwargs) -> Result:
        with tracing.span(P + "push"):
            return await deliver(*args, **kwargs)

    return traced


def push_outcome(delivered: bool, attempts: int) -> None:
    tracing.annotate(**{P + "push.delivered": delivered, P + "push.attempts": attempts})
    metrics.PUSH_DELIVERIES.labels("delivered" if delivered else "given_up").inc()


def token_decision(method: str, allowed: bool, reason: str) -> None:
    """A delegation-token decision: counted, and a denial's reason on the access log line
    and the request's span."""
    result = "allowed" if allowed else "denied"
    metrics.token_decisions(metrics.method_label(method), result).inc()
    if not allowed:
        metrics.TOKEN_REFUSALS.labels(reason).inc()
        http.note(denial_reason=reason)


def unauthenticated_refusal(reason: str) -> None:
    """A stranger's refusal (no token its issuer's key verified): counted by reason."""
    metrics.UNAUTHENTICATED_REFUSALS.labels(reason).inc()


def grpc_connection_refused(reason: str) -> None:
    """A connection to the gRPC port refused by its front door: counted by reason."""
    metrics.GRPC_CONNECTIONS_REFUSED.labels(reason).inc()


def ignored_fields(binding: str, paths: list[str]) -> None:
    """Request members the protocol does not define, ignored: counted and logged (debug),
    by path only, never with their values."""
    if paths:
        metrics.IGNORED_FIELDS.labels(binding).inc(len(paths))
        logger.debug("%s request: ignored unknown members %s", binding, ", ".join(paths))
