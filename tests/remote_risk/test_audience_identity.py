"""remote_risk's audience: the identities of its own card-signing keys, derived from the
keys it holds, never a URL and never a kid label.

A token naming the service's JSON-RPC URL (what an agent's card may claim as its own), a
bare thumbprint (a kid label), or another key's identity is ``audience_mismatch``; a
token for a key the service rotated away from is accepted while that key is still
published, and refused once its grace is over.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_cards.identity import THUMBPRINT_URI_PREFIX, identity_of, thumbprint_uri
from agent_cards.keys import KeySet, SigningKey, TrustedKeys
from member_kit.trust.replay import InMemoryReplayGuard
from member_kit.trust.verifier import DelegationDenied, DelegationVerifier
from remote_risk.settings import Settings
from tests import tokens
from tests.tokens import ATTACKER_KEY, COORDINATOR_KEY, header

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ISSUER = "coordinator"
REQUEST: dict[str, Any] = {
    "skill_id": "assess",
    "required_scopes": ["risk:read"],
    "handoff_id": "handoff-7",
}


def _verifier(settings: Settings, now: datetime = NOW) -> DelegationVerifier:
    def clock() -> datetime:
        return now

    trusted = {ISSUER: TrustedKeys([COORDINATOR_KEY.verification_key()])}
    guard = InMemoryReplayGuard(clock)
    return DelegationVerifier(trusted, settings.audiences, clock=clock, replay_guard=guard)


def _token(audience: str, now: datetime = NOW) -> str:
    at = int(now.timestamp())
    claims = tokens.delegation_claims(now=at, issuer=ISSUER, audience=audience, scope="risk:read")
    return tokens.forge(header(), claims)


def _reason(verifier: DelegationVerifier, token: str) -> str:
    with pytest.raises(DelegationDenied) as denied:
        verifier.verify(token, read_only=True, **REQUEST)
    return denied.value.reason.value


def _settings(keys: KeySet) -> Settings:
    return Settings(public_base_url="http://127.0.0.1:8000", signing_keys=keys)


def test_the_identity_is_the_thumbprint_uri_computed_from_the_active_key() -> None:
    key = SigningKey.generate()
    settings = _settings(KeySet(active=key))
    public = key.private_key.public_key()
    assert settings.agent_id == thumbprint_uri(public) == THUMBPRINT_URI_PREFIX + key.kid
    assert settings.audiences(NOW) == frozenset({settings.agent_id})


@pytest.mark.parametrize(
    "audience",
    [
        "http://127.0.0.1:8000/a2a/jsonrpc",  # the URL a card names
        "KID-LABEL",  # replaced below by the bare thumbprint, a kid label
        "OTHER-KEY",  # replaced below by another key's identity
    ],
    ids=["jsonrpc-url", "bare-thumbprint", "another-key"],
)
def test_an_audience_that_is_not_one_of_its_keys_is_refused(audience: str) -> None:
    key = SigningKey.generate()
    settings = _settings(KeySet(active=key))
    chosen = {"KID-LABEL": key.kid, "OTHER-KEY": identity_of(ATTACKER_KEY.verification_key())}
    token = _token(chosen.get(audience, audience))
    assert _reason(_verifier(settings), token) == "audience_mismatch"


def test_a_rotated_key_stays_an_audience_while_it_is_published() -> None:
    old = KeySet(active=SigningKey.generate())
    rotated = old.rotate(grace=timedelta(minutes=5), now=NOW)
    settings = _settings(rotated)
    old_identity = identity_of(old.active.verification_key())
    assert settings.agent_id == identity_of(rotated.active.verification_key()) != old_identity
    assert settings.audiences(NOW) == {settings.agent_id, old_identity}
    accepted = _verifier(settings).verify(_token(old_identity), read_only=True, **REQUEST)
    assert accepted.grant.aud == old_identity
    later = NOW + timedelta(minutes=6)
    assert _reason(_verifier(settings, later), _token(old_identity, later)) == "audience_mismatch"
