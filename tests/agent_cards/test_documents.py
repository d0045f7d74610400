"""Shipped card documents load as strict A2A v1.0 cards and get deployment URLs at serve time."""

from __future__ import annotations

import pytest

from agent_cards.documents import CardDocumentError, card_for, load_document, parse_card
from contracts.wire import to_wire
from member_kit.server.app import JSONRPC_PATH
from remote_risk.risk.skill import SKILL_ID


def test_risk_document_is_a_v1_card() -> None:
    """The risk document validates as an AgentCard: JSON-RPC 1.0 first (the agent id),
    then HTTP+JSON 1.0 (gRPC is added when a gRPC port is configured)."""
    card = load_document("risk")
    assert card.name == "remote-risk"
    assert [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
    ]
    assert card.provider is not None and card.provider.organization == "Risk team"
    assert card.capabilities.streaming is True
    assert card.capabilities.push_notifications is True
    assert card.default_input_modes == card.default_output_modes == ["application/json"]


def test_risk_document_declares_the_skill_the_service_runs() -> None:
    """The card's only skill is the one remote_risk implements, in JSON both ways."""
    card = load_document("risk")
    assert [skill.id for skill in card.skills] == [SKILL_ID]
    skill = card.skill(SKILL_ID)
    assert skill is not None and skill.tags and skill.examples
    assert skill.input_modes == skill.output_modes == ["application/json"]


def test_risk_document_asks_for_a_delegation_token_and_ships_unsigned() -> None:
    """The card requires a Bearer JWT under the delegation scheme, risk:interpret for the skill,
    and carries no signature: the service signs it with its own key at start."""
    wire = to_wire(load_document("risk"))
    scheme = wire["securitySchemes"]["delegation"]["httpAuthSecurityScheme"]
    assert (scheme["scheme"], scheme["bearerFormat"]) == ("Bearer", "JWT")
    assert wire["securityRequirements"] == [{"schemes": {"delegation": {"list": []}}}]
    (skill,) = wire["skills"]
    assert skill["securityRequirements"] == [
        {"schemes": {"delegation": {"list": ["risk:interpret"]}}}
    ]
    assert "signatures" not in wire


def test_interface_path_resolves_against_the_public_base_url() -> None:
    """At serve time the interface path becomes an absolute URL under the base URL."""
    card = card_for("risk", "https://risk.internal:8443/team")
    interface = card.jsonrpc_interface()
    assert interface is not None
    assert interface.url == "https://risk.internal:8443/team" + JSONRPC_PATH
    assert card_for("risk", "http://127.0.0.1:9/").supported_interfaces[0].url == (
        "http://127.0.0.1:9" + JSONRPC_PATH
    )


def test_unknown_or_unsafe_document_names_are_refused() -> None:
    """Only plain names of shipped documents load; paths are refused."""
    with pytest.raises(CardDocumentError, match="no card document"):
        load_document("nonexistent")
    with pytest.raises(CardDocumentError, match="not a card document name"):
        load_document("../contracts/wire")


def test_a_v03_shaped_document_is_refused_with_readable_reasons() -> None:
    """A card in the v0.3 shape (top-level url, no supportedInterfaces) does not validate."""
    v03 = {
        "name": "old",
        "description": "d",
        "url": "http://127.0.0.1:1/",
        "protocolVersion": "0.3.0",
        "version": "1",
        "capabilities": {},
        "defaultInputModes": [],
        "defaultOutputModes": [],
        "skills": [],
    }
    with pytest.raises(CardDocumentError) as raised:
        parse_card("old", v03)
    assert "supportedInterfaces" in str(raised.value)
    assert "url: Extra inputs are not permitted" in str(raised.value)


def test_base_url_must_be_absolute() -> None:
    """A relative base URL is a deployment error, not a card with broken URLs."""
    with pytest.raises(ValueError):
        card_for("risk", "/only/a/path")
