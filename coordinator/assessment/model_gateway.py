"""The model gateway: one adapter over the official ``openai`` client for every model role.

Any OpenAI-compatible chat-completions service works; it is chosen by environment
(``FEDERATION_MODEL_BASE_URL``, ``FEDERATION_MODEL``, ``FEDERATION_MODEL_API_KEY``, and
optionally ``..._TIMEOUT_SECONDS``, ``..._MAX_OUTPUT_TOKENS`` and ``..._MAX_REPLY_BYTES``),
never by code. The key is held only by the client: it is not in any repr, record or error
message, and :meth:`ModelConfig.describe` prints the URL without credentials.

What the gateway guarantees to the roles that use it:

* client retries are off and every request carries an output limit, so one call to
  :meth:`ModelGateway.complete` is at most one request to the service;
* a total deadline around the whole request, body included (``asyncio.timeout``): the
  smaller of ``timeout_seconds`` and the time the caller has left (a run deadline);
* the body is read with a byte cap before it is parsed, compressed bodies are capped on
  their decoded size (:mod:`agent_cards.models.client`, shared with the kit), and it is
  parsed as data (:mod:`coordinator.assessment.model_reply`): any transport or shape
  failure is a :class:`~coordinator.errors.ModelError` with a stable reason, never another
  exception;
* one :class:`RequestBudget` is shared by every role of a run; a request the budget
  refuses is never sent, and the refusal is :class:`LimitReached` (``limit_reached``);
* an empty reply, a truncated one (``finish_reason`` ``length``), a refusal or any other
  abnormal end raises instead of returning text that looks complete;
* usage is recorded per response exactly as the service reports it; when it reports none,
  the figure stays ``None`` (unknown), never 0.

The errors are in :mod:`coordinator.errors` (``ModelError`` and below).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from agent_cards.models.client import ModelClient, ModelSession
from agent_cards.models.settings import ModelSettings
from coordinator.assessment.model_reply import (
    ModelReply,
    ToolCall,
    Usage,
    complete_reply,
    parse_completion,
)
from coordinator.authority.delegator import DEFAULT_MODEL_REQUESTS
from coordinator.errors import (
    LimitReached,
    ModelConfigError,
    ModelError,
    ModelIncomplete,
    ModelRefused,
    ModelReplyMalformed,
    ModelReplyTooLarge,
    ModelTimeout,
    ModelUnavailable,
    shared_translated,
)
from coordinator.telemetry import metrics

__all__ = [
    "LimitReached",
    "ModelCall",
    "ModelConfig",
    "ModelConfigError",
    "ModelError",
    "ModelGateway",
    "ModelIncomplete",
    "ModelRefused",
    "ModelReply",
    "ModelReplyMalformed",
    "ModelReplyTooLarge",
    "ModelTimeout",
    "ModelUnavailable",
    "RequestBudget",
    "ToolCall",
    "Usage",
]

ENV_PREFIX = "FEDERATION_MODEL"
DEFAULT_REQUEST_BUDGET = DEFAULT_MODEL_REQUESTS
# The outcome of a request another service made for this run and reported.
REMOTE_OUTCOME = "reported_by_remote"


@dataclass(frozen=True, repr=False)
class ModelConfig(ModelSettings):
    """Where the model service is and how each request to it is bounded (see
    :class:`agent_cards.models.settings.ModelSettings`), with the coordinator's errors."""

    def __post_init__(self) -> None:
        with shared_translated():
            super().__post_init__()

    @classmethod
    def from_env(
        cls, prefix: str = ENV_PREFIX, environ: Mapping[str, str] | None = None
    ) -> ModelConfig | None:
        """The configuration under ``prefix``, or ``None`` when none of it is set."""
        with shared_translated():
            return cls.read_env(prefix, environ)


class RequestBudget:
    """Attempted model requests for a whole run, shared by every role that calls a model."""

    def __init__(self, limit: int = DEFAULT_REQUEST_BUDGET) -> None:
        if limit < 0:
            raise ValueError("a request budget cannot be negative")
        self.limit = limit
        self.attempted = 0
        self.remote = 0

    def __repr__(self) -> str:
        return f"RequestBudget(attempted={self.attempted}, limit={self.limit})"

    def reserve(self, role: str) -> None:
        """Count one request for ``role``, or refuse it (it is then not sent)."""
        if self.attempted >= self.limit:
            raise LimitReached(f"{role}: the run's model request budget of {self.limit} is spent")
        self.attempted += 1

    def spent_elsewhere(self, requests: int) -> None:
        """Count requests another service made for this run (already sent: never refused,
        but they leave that much less for the requests still to come)."""
        self.attempted += requests
        self.remote += requests


@dataclass(frozen=True)
class ModelCall:
    """One attempted request: who made it, how it ended, what the service reported using."""

    role: str
    outcome: str
    usage: Usage | None

    def __post_init__(self) -> None:
        # Every attempted request is made into exactly one ModelCall: count it here.
        usage = self.usage
        prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        metrics.model_request(self.role, self.outcome, prompt, completion)

    def as_dict(self) -> dict[str, Any]:
        usage = self.usage
        return {
            "role": self.role,
            "outcome": self.outcome,
            "prompt_tokens": usage.prompt_tokens if usage else None,
            "completion_tokens": usage.completion_tokens if usage else None,
            "total_tokens": usage.total_tokens if usage else None,
        }


class ModelGateway(ModelSession):
    """One run's access to the model service: the shared budget and the record of calls."""

    def __init__(self, config: ModelConfig, budget: RequestBudget | None = None) -> None:
        self.config = config
        self.budget = budget or RequestBudget()
        self.calls: list[ModelCall] = []
        self._client = ModelClient(config)

    def __repr__(self) -> str:
        return f"ModelGateway(model={self.config.model!r}, budget={self.budget!r})"

    async def complete(
        self,
        role: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        json_mode: bool = False,
        seconds_left: float | None = None,
    ) -> ModelReply:
        """Send one request for ``role`` within ``seconds_left`` (and the configured
        deadline); return only a complete reply, raise a ModelError otherwise."""
        seconds = self.config.timeout_seconds
        if seconds_left is not None:
            seconds = min(seconds, seconds_left)
        if seconds <= 0:
            raise ModelTimeout(f"{role}: no time is left for a model request")
        self.budget.reserve(role)
        options: dict[str, Any] = {}
        if tools:
            options["tools"] = list(tools)
        if json_mode:
            options["response_format"] = {"type": "json_object"}
        try:
            body = await self._send(messages, seconds, options)
            completion, usage = parse_completion(body)
        except ModelError as error:
            self.calls.append(ModelCall(role, error.reason, None))
            raise
        try:
            reply = complete_reply(completion, usage)
        except ModelError as error:
            self.calls.append(ModelCall(role, error.reason, usage))
            raise
        self.calls.append(ModelCall(role, "complete", usage))
        return reply

    async def _send(
        self, messages: Sequence[Mapping[str, Any]], seconds: float, options: dict[str, Any]
    ) -> bytes:
        """The raw body of one request's reply (capped), within ``seconds`` in total."""
        with shared_translated():
            return await self._client.send(
                messages, seconds, self.config.max_output_tokens, options
            )

    @property
    def total_tokens(self) -> int | None:
        """Tokens over every attempted request; unknown if any request's usage is unknown."""
        totals = [call.usage.total_tokens if call.usage else None for call in self.calls]
        if not totals or any(total is None for total in totals):
            return None
        return sum(cast(list[int], totals))

    def record_remote(self, role: str, requests: int, total_tokens: int | None) -> None:
        """The model requests a remote specialist reported for ``role``'s handoff: counted
        against the run's budget and in the run's totals (tokens unknown stay unknown)."""
        if requests < 1:
            return
        self.budget.spent_elsewhere(requests)
        tokens = total_tokens if requests == 1 else None
        for _ in range(requests):
            self.calls.append(ModelCall(role, REMOTE_OUTCOME, Usage(None, None, tokens)))

    def report(self) -> dict[str, Any]:
        return {
            "requests": self.budget.attempted,
            "remote_requests": self.budget.remote,
            "request_budget": self.budget.limit,
            "total_tokens": self.total_tokens,
            "calls": [call.as_dict() for call in self.calls],
        }
