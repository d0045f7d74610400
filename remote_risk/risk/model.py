"""The risk service's own model adapter: one bounded JSON-mode request over the ``openai`` client.

Any OpenAI-compatible chat-completions service works; it is chosen by environment
(``REMOTE_RISK_MODEL_BASE_URL``, ``REMOTE_RISK_MODEL``, ``REMOTE_RISK_MODEL_API_KEY`` and
optionally ``..._TIMEOUT_SECONDS``, ``..._MAX_OUTPUT_TOKENS``, ``..._MAX_REPLY_BYTES``),
never by code. The key is held only by the client, never in a repr, record or message.

What :meth:`RiskModel.answer` guarantees to the skill:

* at most ``request_limit`` requests per adapter (the skill's own cap per task, one by
  default) and never more than the delegation grant's model budget allows
  (``handoff.budget.model_requests``, and ``model_tokens`` when the grant names one): a
  request the grant would not cover is not sent (``model_budget_exhausted``); retries
  are off, so one call is at most one request;
* a total deadline around the whole request, body included (``asyncio.timeout``): the
  smaller of ``timeout_seconds`` and what the caller has left (the handoff's lease);
* the reply body is read with a byte cap before it is parsed, compressed bodies are
  capped on their decoded size (:mod:`agent_cards.models.client`, shared with the
  coordinator);
* the reply is data until it is parsed: a body that is not JSON, not a chat completion
  (``{"choices": [null]}``, ``"message": null``), empty, truncated or refused gives a
  :class:`~member_kit.errors.ModelFailure` with a stable ``error_code``, never another
  exception.

The configuration and the bounded client are :mod:`agent_cards.models`; the risk
service's own rules (the grant's budget, the per-task cap, JSON mode, what a complete
reply is) are here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from agent_cards.bounded_replies import REPLY_MALFORMED, REPLY_TOO_LARGE
from agent_cards.models.client import MODEL_TIMEOUT, MODEL_UNAVAILABLE, ModelClient, ModelSession
from agent_cards.models.reply import (
    MODEL_INCOMPLETE,
    MODEL_REFUSED,
    Completion,
    check_ending,
    empty,
    read_completion,
    usage_of,
)
from agent_cards.models.settings import ModelSettings
from contracts.grant import Budget
from member_kit.errors import ModelConfigInvalid, ModelFailure, shared_translated

ENV_PREFIX = "REMOTE_RISK_MODEL"
# Below the coordinator's default handoff lease (30 s), so a slow model is a model failure.
DEFAULT_TIMEOUT_SECONDS = 20.0
# A delegation token outlives its handoff's lease by a few seconds of leeway; the model
# must be done this long before the token's exp so the task can still report in time.
DEFAULT_LEASE_MARGIN_SECONDS = 8.0
# Requests one task may make: the interpretation, and as many retries of an unusable reply.
DEFAULT_REQUESTS_PER_TASK = 1

LIMIT_REACHED = "limit_reached"
MODEL_BUDGET_EXHAUSTED = "model_budget_exhausted"
_JSON_MODE = {"response_format": {"type": "json_object"}}
__all__ = [
    "LIMIT_REACHED",
    "MODEL_BUDGET_EXHAUSTED",
    "MODEL_INCOMPLETE",
    "MODEL_REFUSED",
    "MODEL_TIMEOUT",
    "MODEL_UNAVAILABLE",
    "REPLY_MALFORMED",
    "REPLY_TOO_LARGE",
    "ModelConfig",
    "RiskModel",
]


@dataclass(frozen=True, repr=False)
class ModelConfig(ModelSettings):
    """Where the risk model is and how each request to it is bounded (see
    :class:`agent_cards.models.settings.ModelSettings`), with the kit's errors."""

    ENV_BOUNDS: ClassVar[tuple[str, ...]] = (*ModelSettings.ENV_BOUNDS, "requests_per_task")

    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    lease_margin_seconds: float = DEFAULT_LEASE_MARGIN_SECONDS
    requests_per_task: int = DEFAULT_REQUESTS_PER_TASK

    def __post_init__(self) -> None:
        with shared_translated():
            super().__post_init__()
        if self.lease_margin_seconds < 0:
            raise ModelConfigInvalid("the lease margin cannot be negative")
        if self.requests_per_task < 1:
            raise ModelConfigInvalid("a task needs at least one model request")

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, prefix: str = ENV_PREFIX
    ) -> ModelConfig | None:
        """The configuration under ``prefix``, or ``None`` when none of it is set."""
        with shared_translated():
            return cls.read_env(prefix, environ)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "requests_per_task": self.requests_per_task}


@dataclass(frozen=True)
class ModelAnswer:
    """The text of a complete reply and the tokens the service said it used (None: unknown)."""

    content: str
    total_tokens: int | None


class RiskModel(ModelSession):
    """The risk skill's access to its model: a bounded client and a count of requests."""

    def __init__(
        self, config: ModelConfig, request_limit: int = 1, grant: Budget | None = None
    ) -> None:
        self.config = config
        self.request_limit = request_limit
        self.grant = grant
        self.requests = 0
        self.tokens: list[int | None] = []
        self._client = ModelClient(config)

    def __repr__(self) -> str:
        return f"RiskModel(model={self.config.model!r}, requests={self.requests})"

    def usage(self) -> dict[str, Any]:
        """Requests sent and tokens reported (``None`` when any reply did not say)."""
        known = [t for t in self.tokens if t is not None]
        unknown = len(known) < len(self.tokens) or len(self.tokens) < self.requests
        return {"requests": self.requests, "totalTokens": None if unknown else sum(known)}

    async def answer(
        self, messages: Sequence[Mapping[str, Any]], *, seconds_left: float | None = None
    ) -> ModelAnswer:
        """One JSON-mode request within ``seconds_left`` (and the configured deadline)."""
        seconds = self.config.timeout_seconds
        if seconds_left is not None:
            seconds = min(seconds, seconds_left)
        if seconds <= 0:
            raise ModelFailure(MODEL_TIMEOUT, "no time was left for the model before the lease")
        output_tokens = self._within_grant()
        if self.requests >= self.request_limit:
            raise ModelFailure(LIMIT_REACHED, f"the budget of {self.request_limit} is spent")
        self.requests += 1
        body = await self._send(messages, seconds, output_tokens)
        with shared_translated():
            reply = read_completion(body, Completion)
            total_tokens = _total_tokens(reply)
            self.tokens.append(total_tokens)
            return ModelAnswer(complete_text(reply), total_tokens)

    def _within_grant(self) -> int:
        """The output-token limit of the next request, if the grant's model budget covers
        one more; ``model_budget_exhausted`` (nothing sent) if it does not."""
        limit = self.config.max_output_tokens
        grant = self.grant
        if grant is None:
            return limit
        if grant.model_requests is not None and self.requests >= grant.model_requests:
            raise ModelFailure(
                MODEL_BUDGET_EXHAUSTED,
                f"the grant allows {grant.model_requests} model requests; all are spent",
            )
        if grant.model_tokens is None:
            return limit
        spent = self.usage()["totalTokens"]
        left = grant.model_tokens - spent if spent is not None else 0
        if left <= 0:
            raise ModelFailure(
                MODEL_BUDGET_EXHAUSTED, "the grant's model tokens are spent or unknown"
            )
        return min(limit, left)

    async def _send(
        self, messages: Sequence[Mapping[str, Any]], seconds: float, output_tokens: int
    ) -> bytes:
        with shared_translated():
            return await self._client.send(messages, seconds, output_tokens, _JSON_MODE)


def complete_text(reply: Completion) -> str:
    """The text of the first choice if the reply ended normally, else a shared failure."""
    check_ending(reply, ("stop",))
    text = reply.choices[0].message.content
    if text is None or not text.strip():
        raise empty()
    return text


def _total_tokens(reply: Completion) -> int | None:
    usage = usage_of(reply.usage)
    return usage.total_tokens if usage else None
