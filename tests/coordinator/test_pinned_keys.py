"""A registered agent's pinned keys are parsed once per key set, not on every handoff
(issue 34): the same set gives the same parsed keys and identities, a changed set is
parsed afresh, and a set that does not parse is refused on every use."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from agent_cards.identity import identity_of
from agent_cards.keys import KeyMaterialError, SigningKey
from coordinator.remote.cards.pinned import pinned_identity, pinned_key_set


def jwks(*keys: SigningKey) -> dict[str, list[dict[str, str]]]:
    return {"keys": [key.verification_key().to_jwk() for key in keys]}


def test_an_equal_key_set_is_parsed_once() -> None:
    first, second = SigningKey.generate(), SigningKey.generate()
    document = jwks(first, second)
    parsed = pinned_key_set(document)
    assert pinned_key_set(copy.deepcopy(document)) is parsed
    reordered = {"keys": list(reversed(document["keys"]))}
    assert sorted(k.kid for k in pinned_key_set(reordered)) == sorted(k.kid for k in parsed)


def test_a_changed_key_set_is_parsed_afresh() -> None:
    first, second = SigningKey.generate(), SigningKey.generate()
    before = pinned_key_set(jwks(first))
    after = pinned_key_set(jwks(first, second))
    assert after is not before
    assert len(after) == 2 and second.verification_key().kid in after


def test_identities_of_pinned_keys_are_those_computed_from_the_key() -> None:
    key = SigningKey.generate()
    (pinned,) = pinned_key_set(jwks(key))
    assert pinned_identity(pinned) == identity_of(key.verification_key())
    other = SigningKey.generate().verification_key()  # not of a kept set: computed
    assert pinned_identity(other) == identity_of(other)


@pytest.mark.parametrize(
    "document",
    [{"keys": []}, {"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}, {"nope": 1}],
    ids=["empty", "symmetric", "not-a-set"],
)
def test_an_unusable_key_set_is_refused_on_every_use(document: dict[str, object]) -> None:
    for _ in range(2):
        with pytest.raises((KeyMaterialError, ValueError)):
            pinned_key_set(document)


def test_a_set_holding_what_json_cannot_spell_is_never_taken_from_the_cache() -> None:
    """The cache is keyed by the set's JSON: a value JSON has no spelling for (a
    datetime) makes no key, so such a set is parsed on every use, never mistaken for
    the set it would equal once written out."""
    key = SigningKey.generate()
    odd = {**jwks(key), "seen": datetime.now(UTC)}
    first = pinned_key_set(odd)
    assert pinned_key_set(odd) is not first
    assert pinned_key_set(jwks(key)) is not first
