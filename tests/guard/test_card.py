"""The upstream's card as the guard serves it: its own interfaces, the delegation scheme,
the operator's scope per skill, the receipts extension, nothing it does not forward."""

from __future__ import annotations

import pytest

from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from contracts.wire import AgentCard
from member_kit.errors import UpstreamCardInvalid
from member_kit.guard.card import guarded_card
from member_kit.guard.settings import parse_skill_scopes
from member_kit.server.authorization.asked import skill_authorities

UPSTREAM = AgentCard.model_validate(
    {
        "name": "Word Counter",
        "description": "Counts words.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": "http://10.0.0.9/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": True, "pushNotifications": True},
        "securitySchemes": {"key": {"apiKeySecurityScheme": {"location": "header", "name": "k"}}},
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{"id": "summarize", "name": "Summarize", "description": "", "tags": []}],
    }
)


def test_the_card_points_at_the_guard_and_asks_for_a_delegation_token() -> None:
    card = guarded_card(UPSTREAM, "http://127.0.0.1:7000/", {"summarize": "text:summarize"})
    urls = [(i.protocol_binding, i.url) for i in card.supported_interfaces]
    assert urls == [
        ("JSONRPC", "http://127.0.0.1:7000/a2a/jsonrpc"),
        ("HTTP+JSON", "http://127.0.0.1:7000/a2a/rest"),
    ]
    assert set(card.security_schemes or {}) == {"delegation"}
    assert skill_authorities(card)["summarize"].scopes == {"text:summarize"}
    extensions = card.capabilities.extensions or []
    assert [e.uri for e in extensions] == [RECEIPTS_EXTENSION_URI]
    assert not card.capabilities.streaming and not card.capabilities.push_notifications
    assert card.name == UPSTREAM.name and card.signatures is None


@pytest.mark.parametrize(
    "scopes", [{}, {"summarize": "a", "translate": "b"}], ids=["unscoped", "unknown"]
)
def test_every_skill_needs_a_scope_and_every_scope_a_skill(scopes: dict[str, str]) -> None:
    with pytest.raises(UpstreamCardInvalid):
        guarded_card(UPSTREAM, "http://127.0.0.1:7000", scopes)


@pytest.mark.parametrize("entry", ["summarize", "summarize=", "=s", "s=two words", 's=a"b'])
def test_a_skill_scope_is_one_scope_token(entry: str) -> None:
    with pytest.raises(ValueError):
        parse_skill_scopes([entry])


def test_a_skill_scoped_twice_is_refused() -> None:
    assert parse_skill_scopes(["s=a:b"]) == {"s": "a:b"}
    with pytest.raises(ValueError):
        parse_skill_scopes(["s=a", "s=b"])
