"""Spans and counts of remote_risk's own steps: skill work and push delivery.

Decorators, so the steps themselves stay as they are. The skill's span names the skill and
the state its outcome leads to, never its input or its finding; a push delivery's span
names whether it was delivered and after how many attempts, never the URL's credentials.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from contracts.wire import TaskState
from remote_risk.telemetry import http, metrics, tracing

logger = logging.getLogger(__name__)
P = tracing.PREFIX
SKILL_ID = "interpret-risk-policy"
Params = ParamSpec("Params")
Result = TypeVar("Result")


def skill_work(
    run: Callable[[Mapping[str, Any]], tuple[TaskState, Any]],
) -> Callable[[Mapping[str, Any]], tuple[TaskState, Any]]:
    """The skill's run in a span ``remote_risk.skill``, timed by outcome."""

    @functools.wraps(run)
    def traced(risk_input: Mapping[str, Any]) -> tuple[TaskState, Any]:
        started, outcome = time.perf_counter(), "error"
        try:
            with tracing.span(P + "skill", {P + "skill_id": SKILL_ID}) as span:
                state, finding = run(risk_input)
                outcome = state.name.lower()
                span.set_attribute(P + "task_state", state.value)
                return state, finding
        finally:
            seconds = time.perf_counter() - started
            metrics.SKILL_SECONDS.labels(SKILL_ID, outcome).observe(seconds)

    return traced


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
    metrics.TOKEN_DECISIONS.labels(metrics.method_label(method), result).inc()
    if not allowed:
        metrics.TOKEN_REFUSALS.labels(reason).inc()
        http.note(denial_reason=reason)


def ignored_fields(binding: str, paths: list[str]) -> None:
    """Request members the protocol does not define, ignored: counted and logged (debug),
    by path only, never with their values."""
    if paths:
        metrics.IGNORED_FIELDS.labels(binding).inc(len(paths))
        logger.debug("%s request: ignored unknown members %s", binding, ", ".join(paths))
