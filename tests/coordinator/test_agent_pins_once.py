"""A registered agent's pins are serialised once, not at every read of a handoff (issue
34): its identity (a token's audience), its receipt keys and its known identity read the
same stored document, which is found by its content once and by itself after; pins
changed by ``model_copy`` are a new document and give the new identity."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey
from coordinator.dispatch.attempt.receipts import pinned_keys
from coordinator.remote.cards import pinned
from coordinator.remote.cards.registered_agent import RegisteredAgent


def registered(key: SigningKey) -> RegisteredAgent:
    return RegisteredAgent(
        name="risk",
        card_url="http://127.0.0.1:8081/.well-known/agent-card.json",
        endpoint="http://127.0.0.1:8081/rpc",
        card={},
        registered_at="2026-01-01",
        pinned_jwks={"keys": [key.verification_key().to_jwk()]},
        verified_kid=key.kid,
    )


def counted_dumps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = json.dumps

    def dumps(value: Any, **kwargs: Any) -> str:
        calls.append(1)
        return original(value, **kwargs)

    monkeypatch.setattr(pinned.json, "dumps", dumps)
    return calls


def test_an_agents_pins_are_serialised_once_for_every_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = SigningKey.generate()
    agent = registered(key)
    assert agent.agent_id == identity_of(key.verification_key())  # parsed, and found once
    calls = counted_dumps(monkeypatch)
    for _ in range(3):
        assert agent.agent_id == identity_of(key.verification_key())
        assert agent.known_identity == agent.agent_id
        assert key.kid in pinned_keys(agent)
    assert calls == []  # nothing serialised (json.dumps) again: no key parsed again


def test_pins_changed_by_a_copy_give_the_new_identity() -> None:
    old, new = SigningKey.generate(), SigningKey.generate()
    agent = registered(old)
    assert agent.agent_id == identity_of(old.verification_key())
    moved = agent.model_copy(
        update={"pinned_jwks": {"keys": [new.verification_key().to_jwk()]}, "verified_kid": new.kid}
    )
    assert moved.agent_id == identity_of(new.verification_key())
    assert agent.agent_id == identity_of(old.verification_key())
