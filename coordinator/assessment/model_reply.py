"""A model reply read as data: the body is parsed and shape-checked before anyone uses it.

:func:`read_reply` takes the raw bytes of a chat-completions response (already capped by
:mod:`agent_cards.models.client`) and returns a :class:`ModelReply` only for
a complete answer. A body that is not JSON, or not a chat completion (``{"choices":
[null]}``, ``"message": null``, a tool call that is not an object), is
:class:`~coordinator.errors.ModelReplyMalformed`; no choices, an empty or truncated reply
or any abnormal end is :class:`~coordinator.errors.ModelIncomplete`; a refusal is
:class:`~coordinator.errors.ModelRefused`. The tool calls' contents stay unchecked here:
the supervisor checks them against its own rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict

from contracts import strict_json
from coordinator.errors import ModelIncomplete, ModelRefused, ModelReplyMalformed

COMPLETE_FINISH_REASONS = ("stop", "tool_calls")


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None


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


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Message(_Shape):
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class _Choice(_Shape):
    message: _Message
    finish_reason: str | None = None


class _Completion(_Shape):
    choices: list[_Choice]
    usage: dict[str, Any] | None = None


def parse_completion(body: bytes) -> tuple[_Completion, Usage | None]:
    """The chat completion in ``body`` and its usage, or ModelReplyMalformed."""
    try:
        completion = _Completion.model_validate(strict_json.loads(body))
    except (ValueError, pydantic.ValidationError):
        raise ModelReplyMalformed("the model reply is not a chat completion") from None
    return completion, usage_of(completion.usage)


def usage_of(usage: dict[str, Any] | None) -> Usage | None:
    if usage is None:
        return None
    return Usage(
        _count(usage.get("prompt_tokens")),
        _count(usage.get("completion_tokens")),
        _count(usage.get("total_tokens")),
    )


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def complete_reply(completion: _Completion, usage: Usage | None) -> ModelReply:
    """The reply if it is complete; otherwise the model error saying why not."""
    if not completion.choices:
        raise ModelIncomplete("the model service returned no choices")
    choice = completion.choices[0]
    finish = str(choice.finish_reason)
    message = choice.message
    if message.refusal or finish == "content_filter":
        raise ModelRefused("the model refused to answer")
    if finish == "length":
        raise ModelIncomplete("the reply was cut off at the output-token limit")
    if finish not in COMPLETE_FINISH_REASONS:
        raise ModelIncomplete(f"the reply ended abnormally (finish_reason {finish})")
    calls = tuple(_tool_call(call) for call in message.tool_calls or ())
    if not calls and not (message.content and message.content.strip()):
        raise ModelIncomplete("the reply was empty")
    return ModelReply(message.content, calls, finish, usage)


def _tool_call(call: dict[str, Any]) -> ToolCall:
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    return ToolCall(
        id=call.get("id"),
        type=call.get("type"),
        name=function.get("name"),
        arguments=function.get("arguments"),
    )
