"""A chat-completions reply read as data: parsed and shape-checked before anyone uses it.

The shapes (:class:`Completion`, :class:`Choice`, :class:`Message`) hold what both
services read of a reply and ignore the rest; a service that reads more (the
coordinator's tool calls) extends them. A body that is not JSON or not of the shape is
``model_reply_malformed``; :func:`check_ending` refuses a reply that did not end well:
no choices or an abnormal end is ``model_incomplete``, a refusal ``model_refused``. Usage
is kept as the service reported it (a count that is not a non-negative integer is
unknown, ``None``, never 0).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic
from pydantic import ConfigDict

from agent_cards.bounded_replies import REPLY_MALFORMED
from agent_cards.errors import ModelFailure
from contracts import strict_json
from contracts.model import Model

__all__ = [
    "MODEL_INCOMPLETE",
    "MODEL_REFUSED",
    "Choice",
    "Completion",
    "Message",
    "Usage",
    "check_ending",
    "empty",
    "read_completion",
    "usage_of",
]

MODEL_INCOMPLETE = "model_incomplete"
MODEL_REFUSED = "model_refused"
C = TypeVar("C", bound="Completion")


class _Shape(Model):
    model_config = ConfigDict(extra="ignore")


class Message(_Shape):
    content: str | None = None
    refusal: str | None = None


class Choice(_Shape):
    message: Message
    finish_reason: str | None = None


class Completion(_Shape):
    choices: list[Choice]
    usage: dict[str, Any] | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None


def read_completion(body: bytes, shape: type[C]) -> C:
    """The chat completion in ``body``, of ``shape``, or ``model_reply_malformed``."""
    try:
        return shape.model_validate(strict_json.loads(body))
    except (ValueError, pydantic.ValidationError):
        raise ModelFailure(REPLY_MALFORMED, "the model reply is not a chat completion") from None


def usage_of(usage: dict[str, Any] | None) -> Usage | None:
    """The usage a reply reported, each count unknown unless it is one."""
    if usage is None:
        return None
    return Usage(
        _count(usage.get("prompt_tokens")),
        _count(usage.get("completion_tokens")),
        _count(usage.get("total_tokens")),
    )


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def check_ending(completion: Completion, complete: Collection[str]) -> str:
    """The finish reason of the first choice if it is one of ``complete`` and the model
    did not refuse; ``model_refused`` or ``model_incomplete`` otherwise."""
    if not completion.choices:
        raise ModelFailure(MODEL_INCOMPLETE, "the model reply holds no choices")
    choice = completion.choices[0]
    finish = str(choice.finish_reason)
    if choice.message.refusal or finish == "content_filter":
        raise ModelFailure(MODEL_REFUSED, "the model refused to answer")
    if finish == "length":
        raise ModelFailure(MODEL_INCOMPLETE, "the reply was cut off at the output-token limit")
    if finish not in complete:
        raise ModelFailure(MODEL_INCOMPLETE, f"the reply ended abnormally (finish_reason {finish})")
    return finish


def empty() -> ModelFailure:
    """The failure of a complete reply with nothing in it."""
    return ModelFailure(MODEL_INCOMPLETE, "the reply was empty")
