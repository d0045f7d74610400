"""Where a request for an agent may go, an agent's identity, a run's principal: the rules,
without the network (the processes are in test_counterparty_identity)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_cards.identity import THUMBPRINT_URI_PREFIX
from agent_cards.keys import KeySet, SigningKey
from contracts.wire import PROTOCOL_VERSION, AgentInterface, to_wire
from coordinator.authority.delegator import Delegator, RunAuthority
from coordinator.errors import RegistryError
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.destinations import (
    Destinations,
    Neighbour,
    authority_of,
    check_card,
    check_destination,
)
from remote_risk.service import risk_card

CARD_URL = "http://risk.example:8000/.well-known/agent-card.json"


@pytest.mark.parametrize(
    ("url", "authority"),
    [
        ("http://Risk.Example/a2a", "risk.example:80"),
        ("https://risk.example/a2a", "risk.example:443"),
        ("http://risk.example:8000/x", "risk.example:8000"),
        ("127.0.0.1:50051", "127.0.0.1:50051"),
        ("grpcs://risk.example", "risk.example:443"),
        ("http://[::1]:9/a", "[::1]:9"),
    ],
)
def test_an_origin_is_compared_by_host_and_port(url: str, authority: str) -> None:
    assert authority_of(url) == authority


def test_an_origin_without_a_host_is_refused() -> None:
    with pytest.raises(RegistryError) as refused:
        authority_of("http:///nothing")
    assert refused.value.reason == "origin_invalid"


def _card(*urls: str) -> Any:
    interfaces = [
        AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION)
        for url in urls
    ]
    return risk_card("http://risk.example:8000").model_copy(
        update={"supported_interfaces": interfaces}
    )


def _reason(card: Any, destinations: Destinations, others: list[Neighbour]) -> str | None:
    try:
        check_card(card, destinations, others)
    except RegistryError as exc:
        return exc.reason
    return None


def test_a_card_may_name_only_its_origin_and_what_the_operator_allowed() -> None:
    own = Destinations(CARD_URL)
    assert _reason(_card("http://risk.example:8000/a2a/jsonrpc"), own, []) is None
    off = _card("http://risk.example:8000/a2a/jsonrpc", "http://other.example:8000/a2a")
    assert _reason(off, own, []) == "interface_off_origin"
    allowed = Destinations(CARD_URL, ("other.example:8000",))
    assert _reason(off, allowed, []) is None


def test_a_card_may_not_name_another_registered_agents_address() -> None:
    victim = Neighbour(
        "remote-risk",
        "http://victim.example/.well-known/agent-card.json",
        ("http://victim.example/a2a/jsonrpc",),
    )
    lying = _card("http://risk.example:8000/a2a/rest", "http://victim.example/a2a/jsonrpc")
    allowed = Destinations(CARD_URL, ("victim.example:80",))
    assert _reason(lying, allowed, [victim]) == "interface_of_other_agent"
    # two agents on one origin are fine; the same endpoint is not
    cohosted = Neighbour("b", CARD_URL, ("http://risk.example:8000/b/jsonrpc",))
    assert _reason(_card("http://risk.example:8000/a/jsonrpc"), allowed, [cohosted]) is None
    same = _card("http://risk.example:8000/b/jsonrpc")
    assert _reason(same, allowed, [cohosted]) == "interface_of_other_agent"


def test_a_request_to_a_host_not_allowed_is_refused() -> None:
    check_destination("http://risk.example:8000/a2a/jsonrpc", Destinations(CARD_URL))
    with pytest.raises(RegistryError) as refused:
        check_destination("http://risk.example:8001/a2a/jsonrpc", Destinations(CARD_URL))
    assert refused.value.reason == "destination_not_allowed"


def _stored(key: SigningKey, **changes: Any) -> RegisteredAgent:
    """An agent as agents.json held it before identities (no allowed_origins)."""
    document = {
        "name": "risk",
        "card_url": CARD_URL,
        "endpoint": "http://risk.example:8000/a2a/jsonrpc",
        "card": to_wire(risk_card("http://risk.example:8000")),
        "registered_at": "2026-01-01T00:00:00Z",
        "pinned_jwks": {"keys": [key.public_jwk()]},
        "verified_kid": key.kid,
        **changes,
    }
    return RegisteredAgent.model_validate(document)


def test_a_stored_agents_identity_is_its_pinned_keys_thumbprint_uri() -> None:
    key = SigningKey.generate()
    agent = _stored(key)
    assert agent.agent_id == THUMBPRINT_URI_PREFIX + key.kid
    assert agent.destinations == Destinations(CARD_URL)


def test_an_identity_is_never_a_label() -> None:
    key, other = SigningKey.generate(), SigningKey.generate()
    with pytest.raises(RegistryError) as unknown:
        _ = _stored(key, verified_kid=other.kid).agent_id
    assert unknown.value.reason == "agent_identity_unknown"
    labelled = {**key.public_jwk(), "kid": other.kid}
    with pytest.raises(RegistryError) as mislabelled:
        _ = _stored(key, pinned_jwks={"keys": [labelled]}).agent_id
    assert mislabelled.value.reason == "kid_not_thumbprint"


def test_runs_without_a_principal_get_their_own() -> None:
    keys = SigningKey.generate()
    first = Delegator(KeySet(active=keys), RunAuthority(), run_id="run-a").root.sub
    second = Delegator(KeySet(active=keys), RunAuthority(), run_id="run-b").root.sub
    assert (first, second) == ("run:run-a", "run:run-b")
    given = Delegator(KeySet(active=keys), RunAuthority(principal="alice"), run_id="run-c")
    assert given.root.sub == "alice"
