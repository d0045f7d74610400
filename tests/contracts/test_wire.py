"""The A2A wire models parse what the spec allows and refuse what it does not."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts import strict_json
from contracts.wire import (
    AgentCard,
    GetTaskRequest,
    JSONRPCResponse,
    Message,
    Part,
    SendMessageResponse,
    TaskState,
    to_wire,
)

CARD = {
    "name": "x",
    "description": "d",
    "supportedInterfaces": [
        {"url": "http://127.0.0.1:1/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ],
    "version": "1",
    "capabilities": {},
    "defaultInputModes": ["application/json"],
    "defaultOutputModes": ["application/json"],
    "skills": [{"id": "s", "name": "S", "description": "d", "tags": []}],
}


def test_message_round_trips_in_camel_case() -> None:
    """A message serialises with the spec's camelCase names and drops unset fields."""
    message = Message.model_validate(
        {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"k": 1}}], "taskId": "t"}
    )
    assert to_wire(message) == {
        "messageId": "m1",
        "role": "ROLE_USER",
        "parts": [{"data": {"k": 1}}],
        "taskId": "t",
    }


@pytest.mark.parametrize(
    "params",
    [
        {"id": "t", "historyLength": "7"},
        {"id": "t", "historyLength": 1.5},
        {"id": "t", "historyLength": True},
        {"id": 7},
        {"id": "t", "unknownField": 1},
    ],
)
def test_get_task_refuses_coercion_and_unknown_fields(params: dict[str, object]) -> None:
    """Numeric strings, floats, booleans and unknown fields are refused, never coerced."""
    with pytest.raises(ValidationError):
        GetTaskRequest.model_validate(params)


@pytest.mark.parametrize("part", [{}, {"text": "a", "data": {}}, {"url": "u", "raw": "cg=="}])
def test_part_holds_exactly_one_content(part: dict[str, object]) -> None:
    """A part with no content or with two kinds of content is refused."""
    with pytest.raises(ValidationError):
        Part.model_validate(part)


def test_task_state_rejects_v03_names() -> None:
    """The v0.3 lower-case state names are not v1.0 task states."""
    with pytest.raises(ValueError):
        TaskState("completed")


def test_card_finds_its_v1_jsonrpc_interface() -> None:
    """The card's JSONRPC 1.0 interface is found; a 0.3-only card has none."""
    assert AgentCard.model_validate(CARD).jsonrpc_interface() is not None
    old = {
        **CARD,
        "supportedInterfaces": [{**CARD["supportedInterfaces"][0], "protocolVersion": "0.3"}],
    }  # type: ignore[dict-item]
    assert AgentCard.model_validate(old).jsonrpc_interface() is None


def test_send_message_response_is_a_oneof() -> None:
    """A SendMessage result must hold exactly one of task or message."""
    with pytest.raises(ValidationError):
        SendMessageResponse.model_validate({})


def test_jsonrpc_response_needs_result_or_error() -> None:
    """A JSON-RPC response with neither result nor error is refused."""
    with pytest.raises(ValidationError):
        JSONRPCResponse.model_validate({"jsonrpc": "2.0", "id": 1})


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '{"a": NaN}', '{"a": Infinity}', "{"])
def test_strict_json_refuses_ambiguous_documents(text: str) -> None:
    """Duplicate keys, non-finite numbers and broken JSON are refused."""
    with pytest.raises(strict_json.StrictJSONError):
        strict_json.loads(text)
