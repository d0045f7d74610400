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

from agent_cards.models import reply as shared
from agent_cards.models.reply import Usage, usage_of
from coordinator.errors import shared_translated

COMPLETE_FINISH_REASONS = ("stop", "tool_calls")


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


class _Message(shared.Message):
    tool_calls: list[dict[str, Any]] | None = None


class _Choice(shared.Choice):
    message: _Message


class _Completion(shared.Completion):
    choices: list[_Choice]  # type: ignore[assignment]


def parse_completion(body: bytes) -> tuple[_Completion, Usage | None]:
    """The chat completion in ``body`` and its usage, or ModelReplyMalformed."""
    with shared_translated():
        completion = shared.read_completion(body, _Completion)
    return completion, usage_of(completion.usage)


def complete_reply(completion: _Completion, usage: Usage | None) -> ModelReply:
    """The reply if it is complete; otherwise the model error saying why not."""
    with shared_translated():
        finish = shared.check_ending(completion, COMPLETE_FINISH_REASONS)
        message = completion.choices[0].message
        calls = tuple(_tool_call(call) for call in message.tool_calls or ())
        if not calls and not (message.content and message.content.strip()):
            raise shared.empty()
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
