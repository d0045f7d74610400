"""The A2A wire models parse what the spec allows and refuse what it does not."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from contracts import strict_json
from contracts.wire import (
    AgentCapabilities,
    AgentCard,
    Artifact,
    GetTaskRequest,
    JSONRPCResponse,
    ListTasksResponse,
    Message,
    Part,
    SendMessageResponse,
    TaskState,
    TaskStatusUpdateEvent,
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


# Members ProtoJSON leaves out at their default, each with the default it reads as.
OMITTED = [
    (AgentCard, ["description"], ""),
    (AgentCard, ["version"], ""),
    (AgentCard, ["capabilities"], AgentCapabilities()),
    (AgentCard, ["defaultInputModes"], []),
    (AgentCard, ["skills"], []),
    (AgentCard, ["skills", 0, "description"], ""),
    (AgentCard, ["skills", 0, "tags"], []),
    (AgentCard, ["skills", 0, "securityRequirements", 0, "schemes", "bearer", "list"], []),
]


def _without(document: dict[str, Any], path: list[Any]) -> dict[str, Any]:
    copied = strict_json.loads(strict_json.dumps(document))
    holder = copied
    for step in path[:-1]:
        holder = holder[step]
    del holder[path[-1]]
    return copied


def _at(model: Any, path: list[Any]) -> Any:
    for step in path:
        if isinstance(step, int) or isinstance(model, dict):
            model = model[step]
        else:
            model = getattr(model, _snake(step))
    return model


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


BEARER_CARD = {
    **CARD,
    "skills": [
        {**CARD["skills"][0], "securityRequirements": [{"schemes": {"bearer": {"list": []}}}]}
    ],
}


@pytest.mark.parametrize(("model", "path", "default"), OMITTED)
def test_a_member_protojson_omits_reads_as_its_default(
    model: Any, path: list[Any], default: Any
) -> None:
    """ProtoJSON prints no field at its default (an a2a-sdk card with a scope-less Bearer
    requirement has ``"bearer": {}``): the member reads as that default."""
    parsed = model.model_validate(_without(BEARER_CARD, path))
    assert _at(parsed, path) == default


@pytest.mark.parametrize(
    ("model", "document"),
    [
        (Message, {"role": "ROLE_USER", "parts": [{"text": "x"}]}),
        (Message, {"messageId": "m", "role": "ROLE_USER"}),
        (AgentCard, {**CARD, "supportedInterfaces": []}),
    ],
)
def test_an_omitted_member_gets_the_verdict_its_default_gets(model: Any, document: Any) -> None:
    """An absent messageId is refused as an empty one is, absent parts as no parts: absent
    and default are one input."""
    with pytest.raises(ValidationError):
        model.model_validate(document)


def test_a_message_and_an_event_without_their_default_members_parse() -> None:
    """Role, state, contextId and a list of no tasks are all omissible."""
    assert (
        Message.model_validate({"messageId": "m", "parts": [{"text": ""}]}).role
        == "ROLE_UNSPECIFIED"
    )
    event = TaskStatusUpdateEvent.model_validate({"taskId": "t", "status": {}})
    assert (event.context_id, event.status.state) == ("", TaskState.UNSPECIFIED)
    assert ListTasksResponse.model_validate({}).tasks == []


NULL_DATA_MESSAGE = {
    "messageId": "m",
    "role": "ROLE_USER",
    "parts": [{"data": None}, {"data": {"k": None}}, {"text": "t"}],
}


@pytest.mark.parametrize(
    "message",
    [
        Message.model_validate(NULL_DATA_MESSAGE),
        Message.model_validate_json(strict_json.dumps(NULL_DATA_MESSAGE)),
        Message(message_id="m", role="ROLE_USER",
                parts=[Part(data=None), Part(data={"k": None}), Part(text="t")]),
        Message.model_validate(NULL_DATA_MESSAGE).model_copy(update={"task_id": None}),
    ],
    ids=["parsed", "parsed-from-json", "built", "copied"],
)  # fmt: skip
def test_a_data_part_holding_json_null_keeps_it_in_every_dump(message: Message) -> None:
    """However the part was made, nothing received is dropped: ``data: null`` is content."""
    assert to_wire(message) == NULL_DATA_MESSAGE
    kept = message.model_dump_json(by_alias=True, exclude_none=True)
    assert strict_json.loads(kept) == NULL_DATA_MESSAGE
    artifact = Artifact(artifact_id="a", parts=message.parts)
    assert to_wire(artifact)["parts"] == NULL_DATA_MESSAGE["parts"]
    assert message == Message.model_validate(NULL_DATA_MESSAGE)


def test_only_a_json_null_data_part_is_dumped_by_a_serializer_of_its_own() -> None:
    """Every other part is dumped by pydantic alone, with no call back into Python."""
    assert type(Part(text="t")) is Part
    assert type(Part(data={"k": None})) is Part
    assert type(Part.model_validate({"data": None})) is not Part
    assert isinstance(Part.model_validate({"data": None}), Part)
    assert not Part.__pydantic_decorators__.model_serializers
    assert type(Part(data=None)).__pydantic_decorators__.model_serializers
