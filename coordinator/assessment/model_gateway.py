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
  their decoded size (:mod:`coordinator.assessment.model_transport`), and it is parsed as
  data (:mod:`coordinator.assessment.model_reply`): any transport or shape failure is a
  :class:`~coordinator.errors.ModelError` with a stable reason, never another exception;
* one :class:`RequestBudget` is shared by every role of a run; a request the budget
  refuses is never sent, and the refusal is :class:`LimitReached` (``limit_reached``);
* an empty reply, a truncated one (``finish_reason`` ``length``), a refusal or any other
  abnormal end raises instead of returning text that looks complete;
* usage is recorded per response exactly as the service reports it; when it reports none,
  the figure stays ``None`` (unknown), never 0.

The errors are in :mod:`coordinator.errors` (``ModelError`` and below).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

import httpx

from coordinator.assessment.model_reply import (
    ModelReply,
    ToolCall,
    Usage,
    complete_reply,
    parse_completion,
)
from coordinator.assessment.model_transport import capped_transport
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
)
from coordinator.telemetry import metrics

if TYPE_CHECKING:  # openai is loaded only when a model is configured (a gateway is built)
    import openai

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
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_OUTPUT_TOKENS = 600
DEFAULT_MAX_REPLY_BYTES = 1_000_000
# The outcome of a request another service made for this run and reported.
REMOTE_OUTCOME = "reported_by_remote"
_N = TypeVar("_N", int, float)


@dataclass(frozen=True)
class ModelConfig:
    """Where the model service is and how each request to it is bounded."""

    base_url: str
    model: str
    api_key: str = field(repr=False)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ModelConfigError("the model base URL must be an http(s) URL")
        if not self.model.strip() or not self.api_key.strip():
            raise ModelConfigError("the model id and the API key must not be empty")
        if not self.timeout_seconds > 0 or self.max_output_tokens < 1 or self.max_reply_bytes < 1:
            raise ModelConfigError(
                "the deadline, the output limit and the reply cap must be positive"
            )

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
            _number(env, f"{prefix}_MAX_REPLY_BYTES", int, DEFAULT_MAX_REPLY_BYTES),
        )

    def __repr__(self) -> str:
        return f"ModelConfig(model={self.model!r}, base_url={public_url(self.base_url)!r})"

    def describe(self) -> dict[str, Any]:
        """What a record may say about this configuration (never the key, nor credentials
        or a query in the URL)."""
        return {
            "model": self.model,
            "base_url": public_url(self.base_url),
            "timeout_seconds": self.timeout_seconds,
            "max_output_tokens": self.max_output_tokens,
            "max_reply_bytes": self.max_reply_bytes,
        }


def public_url(url: str) -> str:
    """``url`` without userinfo, query or fragment: what may be printed or recorded."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host, query="", fragment="").geturl()


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


class ModelGateway:
    """One run's access to the model service: the shared budget and the record of calls."""

    def __init__(self, config: ModelConfig, budget: RequestBudget | None = None) -> None:
        import openai

        self.config = config
        self.budget = budget or RequestBudget()
        self.calls: list[ModelCall] = []
        http_client = httpx.AsyncClient(transport=capped_transport(config.max_reply_bytes))
        self._client = openai.AsyncOpenAI(
            api_key=config.api_key,
            base_url=config.base_url,
            timeout=config.timeout_seconds,
            max_retries=0,
            http_client=cast(Any, http_client),
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
        import openai

        try:
            async with asyncio.timeout(seconds):
                raw = await self._client.chat.completions.with_raw_response.create(
                    model=self.config.model,
                    messages=cast(Any, list(messages)),
                    max_tokens=self.config.max_output_tokens,
                    timeout=seconds,
                    **options,
                )
                return bytes(raw.http_response.content)
        except ModelError:
            raise
        except (TimeoutError, openai.APITimeoutError):
            raise ModelTimeout(f"no complete reply within the {seconds:.1f} s deadline") from None
        except openai.OpenAIError as exc:
            raise _translated(exc) from None

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


def _translated(exc: openai.OpenAIError) -> ModelError:
    import openai

    if isinstance(exc, openai.APIConnectionError):
        return ModelUnavailable("cannot connect to the model service")
    if isinstance(exc, openai.APIStatusError):
        return ModelUnavailable(f"the model service answered HTTP {exc.status_code}")
    return ModelUnavailable(f"the model service answered badly ({type(exc).__name__})")
