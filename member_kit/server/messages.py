"""What a member reads from a SendMessage and what it answers with: pure rules, no I/O.

Reading: the configuration a member accepts, the skill's one data part, the handoff
binding (``handoffId``, ``attempt``) the delegating side put in the message metadata and
the member echoes into the task it opens, and the idempotency key of a retried send.
Answering: the outcome's artifact and the agent's messages, each one JSON data part.
"""

from __future__ import annotations

from typing import Any

from contracts.wire import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
)
from member_kit import errors
from member_kit.audit.receipts import bound_metadata
from member_kit.server.jsonrpc import JSON_MEDIA_TYPE, CallContext
from member_kit.skill import Skill
from member_kit.tasks.record import TaskRecord, new_id

HANDOFF_BINDING_KEYS = ("handoffId", "attempt")
IDEMPOTENCY_KEY = "idempotencyKey"
MAX_IDEMPOTENCY_KEY_LENGTH = 512
_JSON_RANGES = frozenset({JSON_MEDIA_TYPE, "application/*", "*/*"})


# --- reading the request ---------------------------------------------------------------------


def check_configuration(configuration: SendMessageConfiguration) -> None:
    modes = configuration.accepted_output_modes
    if modes and not any(_media_type(mode) in _JSON_RANGES for mode in modes):
        raise errors.ContentTypeNotSupported(
            f"this agent answers only in {JSON_MEDIA_TYPE}, which acceptedOutputModes "
            f"({', '.join(modes)}) excludes"
        )
    if configuration.history_length is not None and configuration.history_length < 0:
        raise errors.InvalidParams("params.configuration.historyLength: must be 0 or more")


def skill_input_of(message: Message, skill: Skill) -> dict[str, Any]:
    """The one data part of ``message``, checked to be an acceptable input of ``skill``."""
    data_parts = [(i, part) for i, part in enumerate(message.parts) if _is_data(part)]
    if not data_parts:
        raise errors.ContentTypeNotSupported(
            f"the skill reads one {JSON_MEDIA_TYPE} data part{skill.input_hint}; "
            "this message has none"
        )
    if len(data_parts) > 1:
        raise errors.InvalidParams(
            f"params.message.parts: expected exactly one data part, found {len(data_parts)}"
        )
    index, part = data_parts[0]
    if part.media_type and _media_type(part.media_type) != JSON_MEDIA_TYPE:
        raise errors.ContentTypeNotSupported(
            f"params.message.parts[{index}].mediaType {part.media_type} is not supported; "
            f"use {JSON_MEDIA_TYPE}"
        )
    problems = skill.input_problems(part.data)
    if problems:
        raise errors.InvalidParams(
            "; ".join(f"params.message.parts[{index}].data: {problem}" for problem in problems)
        )
    skill_input: dict[str, Any] = part.data
    return skill_input


def opened_by(record: TaskRecord, message: Message) -> bool:
    """Whether ``message`` opened (or resumed) ``record`` just now, so that this process
    holds its work lease, rather than finding it again (a retried send)."""
    latest = last_user_message(record)
    return latest.message_id == message.message_id


def last_user_message(record: TaskRecord) -> Message:
    """The task's latest message from the caller: its current, complete input."""
    for message in reversed(record.history):
        if message.role is Role.USER:
            return message
    return record.history[0]


def handoff_binding(message: Message) -> dict[str, Any] | None:
    """``handoffId`` and ``attempt`` of the message metadata, echoed into the task it opens
    so that the delegating side can tell which handoff a returned task belongs to."""
    metadata = message.metadata or {}
    binding = {key: metadata[key] for key in HANDOFF_BINDING_KEYS if key in metadata}
    return binding or None


def opened_metadata(message: Message, context: CallContext) -> dict[str, Any] | None:
    """A new task's metadata: the message's handoff binding and, under the receipts
    extension's key, what the caller's token binds (its jti and request digest)."""
    binding = handoff_binding(message)
    if context.bound is None:
        return binding
    bound = bound_metadata(
        context.bound.get("jti"), context.bound.get("req_digest"), context.bound.get("aud")
    )
    return {**(binding or {}), **bound}


def idempotency_key_of(message: Message) -> str | None:
    """``metadata.idempotencyKey`` of the message, if it names one."""
    key = (message.metadata or {}).get(IDEMPOTENCY_KEY)
    if key is None:
        return None
    if not isinstance(key, str) or not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_LENGTH:
        raise errors.InvalidParams(
            f"params.message.metadata.{IDEMPOTENCY_KEY}: must be a string of 1 to "
            f"{MAX_IDEMPOTENCY_KEY_LENGTH} characters"
        )
    return key


def check_same_handoff(record: TaskRecord, message: Message) -> None:
    """A retried send names the handoff its key's task serves."""
    named = (message.metadata or {}).get("handoffId")
    if named != (record.metadata or {}).get("handoffId"):
        raise errors.InvalidParams(
            f"params.message.metadata.{IDEMPOTENCY_KEY}: the key belongs to a task of "
            "another handoff"
        )


def _is_data(part: Part) -> bool:
    return "data" in part.model_fields_set


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


# --- building the answer ---------------------------------------------------------------------


def data_part(data: dict[str, Any]) -> Part:
    return Part(data=data, media_type=JSON_MEDIA_TYPE)


def outcome_artifact(
    skill: Skill, data: dict[str, Any], metadata: dict[str, Any] | None = None
) -> Artifact:
    return Artifact(
        artifact_id=new_id(),
        name=skill.artifact_name,
        description=skill.artifact_description,
        parts=[data_part(data)],
        metadata=metadata,
    )


def agent_message(
    record: TaskRecord, data: dict[str, Any], metadata: dict[str, Any] | None = None
) -> Message:
    return Message(
        message_id=new_id(),
        role=Role.AGENT,
        parts=[data_part(data)],
        task_id=record.id,
        context_id=record.context_id,
        metadata=metadata,
    )
