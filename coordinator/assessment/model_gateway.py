"""The model gateway: one adapter over the official ``openai`` client for every model role.

Any OpenAI-compatible chat-completions service works; it is chosen by environment
(``FEDERATION_MODEL_BASE_URL``, ``FEDERATION_MODEL``, ``FEDERATION_MODEL_API_KEY``, and
optionally ``..._TIMEOUT_SECONDS`` and ``..._MAX_OUTPUT_TOKENS``), never by code. The key
is held only by the client: it is not in any repr, record or error message.

What the gateway guarantees to the roles that use it:

* client retries are off and every request carries an explicit timeout and output limit,
  so one call to :meth:`ModelGateway.complete` is at most one request to the service;
* one :class:`RequestBudget` is shared by every role of a run; a request the budget
  refuses is never sent, and the refusal is :class:`LimitReached` (``limit_reached``);
* an empty reply, a truncated one (``finish_reason`` ``length``), a refusal or any other
  abnormal end raises instead of returning text that looks complete;
* usage is recorded per response exactly as the service reports it; when it reports none,
  the figure stays ``None`` (unknown), never 0.

::

    ModelError (FederationError)     reason
    ├── ModelConfigError             model_config_invalid
    ├── LimitReached                 limit_reached
    ├── ModelIncomplete              model_incomplete
    ├── ModelRefused                 model_refused
    ├── ModelTimeout                 model_timeout
    └── ModelUnavailable             model_unavailable (no connection, HTTP error, not a reply)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import openai
from openai.types.chat import ChatCompletion

from coordinator.errors import FederationError

ENV_PREFIX = "FEDERATION_MODEL"
DEFAULT_REQUEST_BUDGET = 8
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_OUTPUT_TOKENS = 600
COMPLETE_FINISH_REASONS = ("stop", "tool_calls")
_N = TypeVar("_N", int, float)


class ModelError(FederationError):
    default_reason = "model_error"


class ModelConfigError(ModelError):
    default_reason = "model_config_invalid"


class LimitReached(ModelError):
    default_reason = "limit_reached"


class ModelIncomplete(ModelError):
    default_reason = "model_incomplete"


class ModelRefused(ModelError):
    default_reason = "model_refused"


class ModelTimeout(ModelError):
    default_reason = "model_timeout"


class ModelUnavailable(ModelError):
    default_reason = "model_unavailable"


@dataclass(frozen=True)
class ModelConfig:
    """Where the model service is and how each request to it is bounded."""

    base_url: str
    model: str
    api_key: str = field(repr=False)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ModelConfigError("the model base URL must be an http(s) URL")
        if not self.model.strip() or not self.api_key.strip():
            raise ModelConfigError("the model id and the API key must not be empty")
        if not self.timeout_seconds > 0 or self.max_output_tokens < 1:
            raise ModelConfigError("the timeout must be positive and the output limit at least 1")

    @classmethod
    def from_env(
        cls, prefix: str = ENV_PREFIX, environ: Mapping[str, str] | None = None
    ) -> ModelConfig | None:
        """The configuration under ``prefix``, or ``None`` when none of it is set."""
        env = os.environ if environ is None else environ
        names = (f"{prefix}_BASE_URL", prefix, f"{prefix}_API_KEY")
        values = [env.get(name, "").strip() for name in names]
        if not any(values):
            return None
        missing = [name for name, value in zip(names, values, strict=True) if not value]
        if missing:
            raise ModelConfigError(f"model configuration incomplete: {', '.join(missing)} unset")
        base_url, model, api_key = values
        return cls(
            base_url,
            model,
            api_key,
            _number(env, f"{prefix}_TIMEOUT_SECONDS", float, DEFAULT_TIMEOUT_SECONDS),
            _number(env, f"{prefix}_MAX_OUTPUT_TOKENS", int, DEFAULT_MAX_OUTPUT_TOKENS),
        )

    def describe(self) -> dict[str, Any]:
        """What a record may say about this configuration (never the key)."""
        return {
            "model": self.model,
            "base_url": self.base_url,
            "timeout_seconds": self.timeout_seconds,
            "max_output_tokens": self.max_output_tokens,
        }


def _number(env: Mapping[str, str], name: str, kind: type[_N], default: _N) -> _N:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ModelConfigError(f"{name} must be a number") from None


class RequestBudget:
    """Attempted model requests for a whole run, shared by every role that calls a model."""

    def __init__(self, limit: int = DEFAULT_REQUEST_BUDGET) -> None:
        if limit < 0:
            raise ValueError("a request budget cannot be negative")
        self.limit = limit
        self.attempted = 0

    def __repr__(self) -> str:
        return f"RequestBudget(attempted={self.attempted}, limit={self.limit})"

    def reserve(self, role: str) -> None:
        """Count one request for ``role``, or refuse it (it is then not sent)."""
        if self.attempted >= self.limit:
            raise LimitReached(f"{role}: the run's model request budget of {self.limit} is spent")
        self.attempted += 1


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None


@dataclass(frozen=True)
class ModelCall:
    """One attempted request: who made it, how it ended, what the service reported using."""

    role: str
    outcome: str
    usage: Usage | None

    def as_dict(self) -> dict[str, Any]:
        usage = self.usage
        return {
            "role": self.role,
            "outcome": self.outcome,
            "prompt_tokens": usage.prompt_tokens if usage else None,
            "completion_tokens": usage.completion_tokens if usage else None,
            "total_tokens": usage.total_tokens if usage else None,
        }


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the service sent it; nothing here has been checked yet."""

    id: object
    type: object
    name: object
    arguments: object


@dataclass(frozen=True)
class ModelReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: Usage | None


class ModelGateway:
    """One run's access to the model service: the shared budget and the record of calls."""

    def __init__(self, config: ModelConfig, budget: RequestBudget | None = None) -> None:
        self.config = config
        self.budget = budget or RequestBudget()
        self.calls: list[ModelCall] = []
        self._client = openai.AsyncOpenAI(
            api_key=config.api_key,
            base_url=config.base_url,
            timeout=config.timeout_seconds,
            max_retries=0,
        )

    def __repr__(self) -> str:
        return f"ModelGateway(model={self.config.model!r}, budget={self.budget!r})"

    async def __aenter__(self) -> ModelGateway:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self,
        role: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        json_mode: bool = False,
    ) -> ModelReply:
        """Send one request for ``role``; return only a complete reply, raise otherwise."""
        self.budget.reserve(role)
        options: dict[str, Any] = {}
        if tools:
            options["tools"] = list(tools)
        if json_mode:
            options["response_format"] = {"type": "json_object"}
        try:
            response = await self._client.chat.completions.create(
                model=self.config.model,
                messages=cast(Any, list(messages)),
                max_tokens=self.config.max_output_tokens,
                timeout=self.config.timeout_seconds,
                **options,
            )
        except openai.OpenAIError as exc:
            error = _translated(exc)
            self.calls.append(ModelCall(role, error.reason, None))
            raise error from None
        return self._accept(role, response)

    def _accept(self, role: str, response: object) -> ModelReply:
        if not isinstance(response, ChatCompletion):
            self.calls.append(ModelCall(role, "model_unavailable", None))
            raise ModelUnavailable("the model service did not answer with a chat completion")
        usage = _usage(response)
        try:
            reply = _reply(response, usage)
        except ModelError as error:
            self.calls.append(ModelCall(role, error.reason, usage))
            raise
        self.calls.append(ModelCall(role, "complete", usage))
        return reply

    @property
    def total_tokens(self) -> int | None:
        """Tokens over every attempted request; unknown if any request's usage is unknown."""
        totals = [call.usage.total_tokens if call.usage else None for call in self.calls]
        if not totals or any(total is None for total in totals):
            return None
        return sum(cast(list[int], totals))

    def report(self) -> dict[str, Any]:
        return {
            "requests": self.budget.attempted,
            "request_budget": self.budget.limit,
            "total_tokens": self.total_tokens,
            "calls": [call.as_dict() for call in self.calls],
        }


def _translated(exc: openai.OpenAIError) -> ModelError:
    if isinstance(exc, openai.APITimeoutError):
        return ModelTimeout("the model service did not answer within the request timeout")
    if isinstance(exc, openai.APIConnectionError):
        return ModelUnavailable("cannot connect to the model service")
    if isinstance(exc, openai.APIStatusError):
        return ModelUnavailable(f"the model service answered HTTP {exc.status_code}")
    return ModelUnavailable(f"the model service answered badly ({type(exc).__name__})")


def _usage(response: ChatCompletion) -> Usage | None:
    usage = response.usage
    if usage is None:
        return None
    return Usage(
        _count(getattr(usage, "prompt_tokens", None)),
        _count(getattr(usage, "completion_tokens", None)),
        _count(getattr(usage, "total_tokens", None)),
    )


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _reply(response: ChatCompletion, usage: Usage | None) -> ModelReply:
    if not response.choices:
        raise ModelIncomplete("the model service returned no choices")
    choice = response.choices[0]
    finish = str(choice.finish_reason)
    message = choice.message
    if getattr(message, "refusal", None) or finish == "content_filter":
        raise ModelRefused("the model refused to answer")
    if finish == "length":
        raise ModelIncomplete("the reply was cut off at the output-token limit")
    if finish not in COMPLETE_FINISH_REASONS:
        raise ModelIncomplete(f"the reply ended abnormally (finish_reason {finish})")
    content = message.content if isinstance(message.content, str) else None
    calls = tuple(_tool_call(call) for call in message.tool_calls or ())
    if not calls and not (content and content.strip()):
        raise ModelIncomplete("the reply was empty")
    return ModelReply(content, calls, finish, usage)


def _tool_call(call: object) -> ToolCall:
    function = getattr(call, "function", None)
    return ToolCall(
        id=getattr(call, "id", None),
        type=getattr(call, "type", None),
        name=getattr(function, "name", None),
        arguments=getattr(function, "arguments", None),
    )
