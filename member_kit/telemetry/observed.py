"""One member app's telemetry, in one object: :class:`Telemetry`.

Built once per app from the member's names (:mod:`member_kit.telemetry.names`) and handed
to whatever observes on the app's behalf (the observed HTTP edge, the endpoints, the task
handler, the authorizer and decision log, push delivery, the gRPC server): its own
metrics registry, its service's tracing, its span prefix, its access logger and the
facts of the request it is serving. Nothing is looked up by name per request, and no
app counts into another's ``/metrics``, even in one process.

Its methods observe a member service's own steps: the token check before the body, skill
work (deterministic or model-backed) and push delivery, the token decisions, ignored
request members. Decorators and wrappers, so the steps themselves stay as they are. The
skill's span names the skill and the state its outcome leads to, never its input or its
finding; the model-backed skill's span adds the model requests and tokens it used, its
grant's model budget and its failure's reason code, never a prompt, a reply or the
model's key; a push delivery's span names whether it was delivered and after how many
attempts, never the URL's credentials.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, ParamSpec, TypeVar

from opentelemetry import trace

from agent_cards.telemetry.http import RequestFacts
from contracts.grant import Budget
from member_kit.skill import Outcome, Skill, run_now
from member_kit.telemetry.metrics import MemberMetrics, method_label
from member_kit.telemetry.names import TelemetryNames
from member_kit.telemetry.tracing import Attribute, annotate, tracing_for

__all__ = ["STANDALONE", "Telemetry"]

logger = logging.getLogger(__name__)
Params = ParamSpec("Params")
Result = TypeVar("Result")
# What a part built on its own (outside any app: a test's handler or endpoint) is named.
STANDALONE = "member"


class Telemetry:
    """One app's metrics, tracing, span prefix, access logger and request facts."""

    def __init__(self, names: TelemetryNames) -> None:
        self.names = names
        self.prefix = names.span_prefix
        self.metrics = MemberMetrics(names.metrics_prefix)
        self.tracing = tracing_for(names)
        self.access_logger = logging.getLogger(names.access_logger)
        self.facts = RequestFacts(names.base + "_request_facts", self.prefix)
        self.note = self.facts.note

    @classmethod
    def of(cls, member_name: str) -> Telemetry:
        """The telemetry of the member called ``member_name``."""
        return cls(TelemetryNames.of(member_name))

    @classmethod
    def standalone(cls) -> Telemetry:
        """For a part built outside any app (its counts reach no ``/metrics``)."""
        return cls.of(STANDALONE)

    def in_request(self) -> bool:
        """Whether an HTTP request (or a gRPC call) is being served: its access line will
        be written, with whatever is noted."""
        return self.facts.current.get() is not None

    def step_span(
        self, name: str, attributes: Mapping[str, Attribute | None] | None = None
    ) -> AbstractContextManager[trace.Span]:
        """An internal step's span ``<prefix>name``: none at all when nothing receives
        spans (the request's span stays current, so its logs still name its trace)."""
        return self.tracing.internal_span(self.prefix + name, attributes)

    def skill_now(self, skill: Skill, skill_input: Mapping[str, Any]) -> Outcome:
        """An immediate skill's run (:func:`~member_kit.skill.run_now`) in a span
        ``<prefix>skill`` (none when nobody receives spans: the request's stays current),
        timed by outcome."""
        started, ended, p = time.perf_counter(), "error", self.prefix
        try:
            with self.step_span("skill", {p + "skill_id": skill.skill_id}) as span:
                outcome = run_now(skill, skill_input)
                ended = outcome.state.name.lower()
                span.set_attribute(p + "task_state", outcome.state.value)
                return outcome
        finally:
            self.metrics.skill_seconds(skill.skill_id, ended).observe(time.perf_counter() - started)

    async def skill_later(
        self,
        skill: Skill,
        skill_input: Mapping[str, Any],
        *,
        lease_expires_at: int | None,
        budget: Budget | None,
    ) -> Outcome:
        """A background skill's run in a span ``<prefix>skill``, timed by outcome, with
        the model requests and tokens it reports and its grant's model budget."""
        started, ended, p = time.perf_counter(), "error", self.prefix
        attributes: dict[str, Attribute | None] = {
            p + "skill_id": skill.skill_id,
            p + "skill.model": True,
            p + "model.budget": budget.model_requests if budget is not None else None,
        }
        try:
            with self.tracing.span(p + "skill", attributes) as span:
                outcome = await skill.run_later(
                    skill_input, lease_expires_at=lease_expires_at, budget=budget
                )
                ended = outcome.state.name.lower()
                if span.is_recording():
                    self._model_outcome(span, outcome)
                return outcome
        finally:
            self.metrics.skill_seconds(skill.skill_id, ended).observe(time.perf_counter() - started)

    def _model_outcome(self, span: trace.Span, outcome: Outcome) -> None:
        usage, p = outcome.usage or {}, self.prefix
        span.set_attribute(p + "task_state", outcome.state.value)
        span.set_attribute(p + "model.requests", int(usage.get("requests") or 0))
        tokens = usage.get("totalTokens")
        if type(tokens) is int:
            span.set_attribute(p + "model.total_tokens", tokens)
        code = outcome.data.get("errorCode")
        if isinstance(code, str) and code:
            span.set_attribute(p + "error_code", code)

    def checked_before_body(self, span: trace.Span, reason: str | None) -> None:
        """The verdict of the token check made from the headers alone, on its span."""
        if span.is_recording():
            span.set_attribute(self.prefix + "token.verdict", "denied" if reason else "allowed")
            if reason:
                span.set_attribute(self.prefix + "denial_reason", reason)

    def push_delivery(
        self, deliver: Callable[Params, Awaitable[Result]]
    ) -> Callable[Params, Awaitable[Result]]:
        """A push delivery (all its attempts) in a span ``<prefix>push``."""

        @functools.wraps(deliver)
        async def traced(*args: Params.args, **kwargs: Params.kwargs) -> Result:
            with self.tracing.span(self.prefix + "push"):
                return await deliver(*args, **kwargs)

        return traced

    def push_outcome(self, delivered: bool, attempts: int) -> None:
        p = self.prefix
        annotate(**{p + "push.delivered": delivered, p + "push.attempts": attempts})
        self.metrics.push_deliveries.labels("delivered" if delivered else "given_up").inc()

    def token_decision(self, method: str, allowed: bool, reason: str) -> None:
        """A delegation-token decision: counted, and a denial's reason on the access log
        line and the request's span."""
        result = "allowed" if allowed else "denied"
        self.metrics.token_decisions(method_label(method), result).inc()
        if not allowed:
            self.metrics.token_refusals.labels(reason).inc()
            self.note(denial_reason=reason)

    def unauthenticated_refusal(self, reason: str) -> None:
        """A stranger's refusal (no token its issuer's key verified): counted by reason."""
        self.metrics.unauthenticated_refusals.labels(reason).inc()

    def grpc_connection_refused(self, reason: str) -> None:
        """A connection to the gRPC port refused by its front door: counted by reason."""
        self.metrics.grpc_connections_refused.labels(reason).inc()

    def ignored_fields(self, binding: str, paths: list[str]) -> None:
        """Request members the protocol does not define, ignored: counted and logged
        (debug), by path only, never with their values."""
        if paths:
            self.metrics.ignored_fields.labels(binding).inc(len(paths))
            logger.debug("%s request: ignored unknown members %s", binding, ", ".join(paths))
