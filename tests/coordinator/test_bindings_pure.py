"""The pure parts of the bindings, table-driven: which interface a card gets, how a
google.rpc.Status names an A2A error, how v0.3 cards, states and parts read as v1.0."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.wire import AgentCard, Message, Part, Role, TaskState
from coordinator.errors import ProtocolError, RegistryError, TransportError
from coordinator.handoff.state_map import local_view, v03_task_state
from coordinator.remote.wire.grpc_transport import channel_target
from coordinator.remote.wire.transport import choose_interface
from coordinator.remote.wire.v03 import shapes
from coordinator.remote.wire.v03.card import card_model, is_v03_card
from coordinator.remote.wire.wire_errors import from_http_status_body

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def _card(*interfaces: tuple[str, str]) -> AgentCard:
    return AgentCard.model_validate(
        {
            "name": "a",
            "description": "",
            "version": "1",
            "capabilities": {},
            "defaultInputModes": [],
            "defaultOutputModes": [],
            "skills": [],
            "supportedInterfaces": [
                {"url": f"http://h/{b}", "protocolBinding": b, "protocolVersion": v}
                for b, v in interfaces
            ],
        }
    )


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        ([("GRPC", "1.0"), ("JSONRPC", "1.0")], ("GRPC", "1.0")),
        ([("SLIMRPC", "1.0"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0")], ("HTTP+JSON", "1.0")),
        ([("HTTP+JSON", "0.3"), ("JSONRPC", "0.3")], ("JSONRPC", "0.3")),
        ([("JSONRPC", "2.0"), ("JSONRPC", "1.1")], ("JSONRPC", "1.1")),
    ],
)
def test_the_first_interface_we_speak_in_the_cards_order(
    offered: list[tuple[str, str]], chosen: tuple[str, str]
) -> None:
    """The card's order is its preference; bindings or versions we do not speak are passed."""
    interface = choose_interface(_card(*offered))
    assert (interface.binding, interface.protocol_version) == chosen


def test_a_card_with_nothing_we_speak_is_refused() -> None:
    with pytest.raises(RegistryError) as refused:
        choose_interface(_card(("SLIMRPC", "1.0"), ("GRPC", "0.3")))
    assert refused.value.reason == "no_supported_interface"


@pytest.mark.parametrize(
    ("body", "code", "reason"),
    [
        ({"error": {"code": 404, "status": "NOT_FOUND", "message": "m", "details": [
            {"@type": ERROR_INFO, "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}
        ]}}, -32001, "TASK_NOT_FOUND"),
        ({"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "m", "details": [
            {"@type": ERROR_INFO, "reason": "TASK_NOT_CANCELABLE", "domain": "a2a-protocol.org"}
        ]}}, -32002, "TASK_NOT_CANCELABLE"),
        ({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": "m"}}, -32090, None),
        ({"error": {"code": 404, "status": "NOT_FOUND", "message": "m"}}, -32001, None),
    ],
)  # fmt: skip
def test_a_status_body_names_the_a2a_error(body: dict[str, Any], code: int, reason: str) -> None:
    """The ErrorInfo reason decides; without one, only an unambiguous status name does."""
    error = from_http_status_body(400, body, "call")
    assert (error.code, error.error_info_reason) == (code, reason)


def test_a_status_naming_no_a2a_error_and_a_body_that_is_no_status() -> None:
    """A status the table gives to several A2A errors is refused, not guessed; a
    body that is not a google.rpc.Status is a transport failure with its HTTP status."""
    for name in ("FAILED_PRECONDITION", "INVALID_ARGUMENT", "INTERNAL"):
        with pytest.raises(ProtocolError) as unnamed:
            raise from_http_status_body(400, {"error": {"status": name}}, "call")
        assert unnamed.value.reason == "error_info_missing"
    with pytest.raises(TransportError) as plain:
        raise from_http_status_body(502, "<html>", "call")
    assert plain.value.reason == "http_status"


@pytest.mark.parametrize(
    ("url", "target", "tls"),
    [
        ("127.0.0.1:50051", "127.0.0.1:50051", False),
        ("agent.example:443", "agent.example:443", True),
        ("grpc://agent.example:50051", "agent.example:50051", False),
        ("grpcs://127.0.0.1:50051", "127.0.0.1:50051", True),
    ],
)
def test_grpc_targets(url: str, target: str, tls: bool) -> None:
    assert channel_target(url) == (target, tls)


V03_CARD = {
    "name": "old agent",
    "description": "speaks v0.3",
    "url": "http://h/rpc",
    "preferredTransport": "JSONRPC",
    "protocolVersion": "0.3.0",
    "additionalInterfaces": [{"url": "http://h/rest", "transport": "HTTP+JSON"}],
    "version": "1",
    "capabilities": {"streaming": True, "stateTransitionHistory": True},
    "supportsAuthenticatedExtendedCard": True,
    "securitySchemes": {"d": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
    "security": [{"d": ["risk:interpret"]}],
    "defaultInputModes": ["application/json"],
    "defaultOutputModes": ["application/json"],
    "skills": [{"id": "s", "name": "S", "description": "", "tags": [], "security": [{"d": ["x"]}]}],
}


def test_a_v03_card_reads_as_the_v1_card_it_describes() -> None:
    assert is_v03_card(V03_CARD)
    card = card_model(V03_CARD)
    assert [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        ("JSONRPC", "0.3.0"),
        ("HTTP+JSON", "0.3.0"),
    ]
    assert card.capabilities.extended_agent_card is True
    schemes = card.security_schemes or {}
    assert schemes["d"].http_auth_security_scheme is not None
    assert card.skills[0].security_requirements is not None
    assert card.skills[0].security_requirements[0].schemes["d"].list == ["x"]
    assert choose_interface(card).url == "http://h/rpc"


@pytest.mark.parametrize(
    ("state", "local"),
    [
        ("completed", "RETURNED"),
        ("input-required", "RUNNING"),
        ("auth-required", "RUNNING"),
        ("canceled", "CANCELLED"),
        ("rejected", "FAILED"),
        ("unknown", "QUARANTINED"),
        ("COMPLETED", "QUARANTINED"),
        (None, "QUARANTINED"),
    ],
)
def test_v03_states_map_onto_the_same_handoff_states(state: Any, local: str) -> None:
    assert local_view(v03_task_state(state).value).state.value == local


def test_v03_parts_and_tasks_both_ways() -> None:
    message = Message(
        message_id="m",
        role=Role.USER,
        parts=[Part(data={"a": 1}), Part(text="t"), Part(url="http://f", media_type="x/y")],
        metadata={"handoffId": "h", "attempt": 1},
    )
    sent = shapes.message_out(message)
    assert sent["role"] == "user" and sent["kind"] == "message"
    assert [p["kind"] for p in sent["parts"]] == ["data", "text", "file"]
    assert sent["parts"][2]["file"] == {"uri": "http://f", "mimeType": "x/y"}
    task = shapes.task_in(
        {
            "kind": "task",
            "id": "t",
            "contextId": "c",
            "status": {"state": "completed"},
            "artifacts": [{"artifactId": "a", "parts": sent["parts"]}],
            "unknownField": 1,
        }
    )
    assert task.status.state is TaskState.COMPLETED
    assert task.artifacts is not None and task.artifacts[0].parts == message.parts


def test_a_v03_data_part_holds_an_object_only() -> None:
    message = Message(message_id="m", role=Role.USER, parts=[Part(data=[1, 2])])
    with pytest.raises(ProtocolError) as refused:
        shapes.message_out(message)
    assert refused.value.reason == "v03_unrepresentable"


def test_an_agent_is_known_by_one_id_whichever_binding_is_used() -> None:
    """A token's audience follows neither the binding nor any URL the card names: it is
    the RFC 9278 thumbprint URI of the pinned key that verified the card (what remote_risk
    checks on every binding)."""
    from agent_cards.identity import THUMBPRINT_URI_PREFIX
    from agent_cards.keys import SigningKey
    from coordinator.remote.cards.registered_agent import RegisteredAgent

    key = SigningKey.generate()

    def agent(card: AgentCard, endpoint: str, binding: str) -> RegisteredAgent:
        document = card.model_dump(mode="json", by_alias=True, exclude_none=True)
        return RegisteredAgent(
            name="a", card_url="http://h/card", endpoint=endpoint, binding=binding,
            card=document, registered_at="now", pinned_jwks={"keys": [key.public_jwk()]},
            verified_kid=key.kid,
        )  # fmt: skip

    both = _card(("GRPC", "1.0"), ("JSONRPC", "1.0"))
    rest_only = _card(("HTTP+JSON", "1.0"))
    ids = {
        agent(both, "http://h/GRPC", "GRPC").agent_id,
        agent(both, "http://h/JSONRPC", "JSONRPC").agent_id,
        agent(rest_only, "http://h/HTTP+JSON", "HTTP+JSON").agent_id,
    }
    assert ids == {THUMBPRINT_URI_PREFIX + key.kid}
