"""Agent Card signatures: detached JWS over JCS, verified against pinned keys only."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from jwt.algorithms import get_default_algorithms

from agent_cards.keys import SigningKey, TrustedKeys, b64url_decode, b64url_encode, load_or_create
from agent_cards.signing import (
    CardVerificationError,
    canonical_card,
    canonical_card_v03_jcs,
    sign_card,
    verify_card,
)
from contracts import strict_json
from contracts.wire import AgentCard, to_wire

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
KEY = SigningKey.generate("EdDSA")
PINNED = TrustedKeys([KEY.verification_key()])


def _card() -> dict[str, Any]:
    card = AgentCard.model_validate(
        {
            "name": "Remote risk",
            "description": "Checks a plan against the risk policy.",
            "supportedInterfaces": [
                {
                    "url": "http://127.0.0.1:9000/a2a/jsonrpc",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }
            ],
            "version": "0.1.0",
            "capabilities": {"streaming": False},
            "defaultInputModes": ["application/json"],
            "defaultOutputModes": ["application/json"],
            "skills": [{"id": "assess", "name": "Assess", "description": "", "tags": []}],
        }
    )
    return to_wire(card)


def _entry_with_header(
    header: dict[str, Any], card: dict[str, Any], key: SigningKey
) -> dict[str, str]:
    """A signature entry with a hand-written protected header, signed correctly by ``key``."""
    protected = b64url_encode(json.dumps(header).encode())
    signing_input = f"{protected}.{b64url_encode(canonical_card(card))}".encode()
    algorithm = get_default_algorithms()[key.alg]
    return {
        "protected": protected,
        "signature": b64url_encode(algorithm.sign(signing_input, key.private_key)),
    }


def _reason(card: dict[str, Any], trusted: TrustedKeys = PINNED, **kwargs: Any) -> str:
    with pytest.raises(CardVerificationError) as caught:
        verify_card(card, trusted, **kwargs)
    return caught.value.reason


@pytest.mark.parametrize("alg", ["EdDSA", "ES256"])
def test_signed_card_verifies_with_the_pinned_key(alg: str) -> None:
    """A card signed with a pinned key verifies and reports that key's kid."""
    key = SigningKey.generate(alg)  # type: ignore[arg-type]
    signed = sign_card(_card(), key)
    assert verify_card(signed, TrustedKeys([key.verification_key()])).kid == key.kid


def test_protected_header_is_exactly_alg_kid_typ() -> None:
    """The protected header names the algorithm, the kid and typ JOSE, and nothing else."""
    signed = sign_card(_card(), KEY)
    header = json.loads(b64url_decode(signed["signatures"][0]["protected"]))
    assert header == {"alg": "EdDSA", "kid": KEY.kid, "typ": "JOSE"}


FILLED = b'"capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],"description":"",'


def test_canonical_form_drops_signatures_and_nulls() -> None:
    """The signed bytes are the JCS form of the card without signatures and null members;
    the REQUIRED members it leaves out are there at their default (section 8.4.1)."""
    card = {"name": "A", "iconUrl": None, "skills": [], "signatures": [{"x": 1}], "b": {"c": None}}
    assert canonical_card(card) == (
        b'{"b":{},' + FILLED + b'"name":"A","skills":[],"supportedInterfaces":[],"version":""}'
    )
    assert canonical_card(card) == rfc8785.dumps(strict_json.loads(canonical_card(card)))


def test_signed_card_still_parses_as_a_wire_agent_card() -> None:
    """The signature entry fits the A2A AgentCardSignature shape of the wire model."""
    signed = sign_card(_card(), KEY)
    parsed = AgentCard.model_validate(signed)
    # one entry over the spec's form, one over the a2a-sdk's (which leaves out the
    # skill's empty description and tags)
    assert parsed.signatures is not None and len(parsed.signatures) == 2
    assert verify_card(to_wire(parsed), PINNED).kid == KEY.kid


def test_member_order_does_not_matter() -> None:
    """Reordering the card's members after signing leaves the signature valid."""
    signed = sign_card(_card(), KEY)
    reordered = dict(reversed(list(signed.items())))
    assert verify_card(reordered, PINNED).kid == KEY.kid


@pytest.mark.parametrize("signatures", [None, [], "absent"])
def test_unsigned_card_is_refused(signatures: Any) -> None:
    """A card without any signature entry is refused as card_unsigned."""
    card = _card()
    if signatures != "absent":
        card["signatures"] = signatures
    assert _reason(card) == "card_unsigned"


def test_card_tampered_after_signing_is_refused() -> None:
    """Changing any member after signing makes the pinned signature fail."""
    signed = sign_card(_card(), KEY)
    tampered = copy.deepcopy(signed)
    tampered["supportedInterfaces"][0]["url"] = "http://attacker.example/a2a"
    assert _reason(tampered) == "card_signature_invalid"


def test_adding_a_null_member_does_not_count_as_tampering() -> None:
    """A null member is omitted from the canonical form, so adding one changes nothing."""
    signed = sign_card(_card(), KEY)
    assert verify_card({**signed, "iconUrl": None}, PINNED).kid == KEY.kid


def test_card_signed_by_an_unpinned_key_is_refused() -> None:
    """A valid signature by a key the verifier has not pinned is refused as card_kid_unknown."""
    stranger = SigningKey.generate()
    assert _reason(sign_card(_card(), stranger)) == "card_kid_unknown"


def test_unpinned_key_reusing_a_pinned_kid_is_refused() -> None:
    """Claiming a pinned kid while signing with another key fails the signature check."""
    stranger = SigningKey.generate()
    card = _card()
    entry = _entry_with_header({"alg": "EdDSA", "kid": KEY.kid, "typ": "JOSE"}, card, stranger)
    assert _reason({**card, "signatures": [entry]}) == "card_signature_invalid"


def test_jku_pointing_elsewhere_fails_outright() -> None:
    """A jku in the protected header refuses the card even when a pinned key signed it."""
    card = _card()
    header = {"alg": "EdDSA", "kid": KEY.kid, "typ": "JOSE", "jku": "https://evil.example/jwks"}
    entry = _entry_with_header(header, card, KEY)
    assert _reason({**card, "signatures": [entry]}) == "card_header_invalid"


@pytest.mark.parametrize("member", ["x5u", "jwk", "x5c", "crit"])
def test_other_key_locating_header_members_fail(member: str) -> None:
    """x5u, jwk, x5c and crit in the protected header are refused like jku."""
    card = _card()
    header = {"alg": "EdDSA", "kid": KEY.kid, "typ": "JOSE", member: "x"}
    entry = _entry_with_header(header, card, KEY)
    assert _reason({**card, "signatures": [entry]}) == "card_header_invalid"


def test_jku_in_one_entry_refuses_the_whole_card() -> None:
    """A forbidden header in any entry refuses the card even if another entry verifies."""
    card = _card()
    bad = _entry_with_header({"alg": "EdDSA", "kid": KEY.kid, "typ": "JOSE", "jku": "x"}, card, KEY)
    good = sign_card(card, KEY)["signatures"][0]
    assert _reason({**card, "signatures": [good, bad]}) == "card_header_invalid"


def test_unprotected_header_is_refused() -> None:
    """An unprotected header member cannot smuggle unsigned key hints past the check."""
    signed = sign_card(_card(), KEY)
    signed["signatures"][0]["header"] = {"jku": "https://evil.example/jwks"}
    assert _reason(signed) == "card_header_invalid"


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "none", "kid": KEY.kid, "typ": "JOSE"},
        {"alg": "RS256", "kid": KEY.kid, "typ": "JOSE"},
        {"kid": KEY.kid, "typ": "JOSE"},
        {"alg": "EdDSA", "typ": "JOSE"},
        {"alg": "EdDSA", "kid": 1, "typ": "JOSE"},
        {"alg": "EdDSA", "kid": KEY.kid, "typ": "JWT"},
    ],
)
def test_header_outside_the_profile_is_refused(header: dict[str, Any]) -> None:
    """A protected header with a bad alg, kid or typ is refused as card_header_invalid."""
    card = _card()
    entry = {"protected": b64url_encode(json.dumps(header).encode()), "signature": "AAAA"}
    if header.get("alg") == "EdDSA":
        entry = _entry_with_header(header, card, KEY)
    assert _reason({**card, "signatures": [entry]}) == "card_header_invalid"


def test_hs256_with_the_public_key_as_secret_is_refused() -> None:
    """An HMAC signature keyed with the public key bytes never verifies a card."""
    card = _card()
    header = {"alg": "HS256", "kid": KEY.kid, "typ": "JOSE"}
    protected = b64url_encode(json.dumps(header).encode())
    secret = json.dumps(KEY.public_jwk()).encode()
    signing_input = f"{protected}.{b64url_encode(canonical_card(card))}".encode()
    mac = hmac.new(secret, signing_input, hashlib.sha256).digest()
    entry = {"protected": protected, "signature": b64url_encode(mac)}
    assert _reason({**card, "signatures": [entry]}) == "card_header_invalid"


def test_duplicate_member_in_protected_header_is_refused() -> None:
    """A protected header repeating alg is refused rather than read last-wins."""
    card = _card()
    entry = sign_card(card, KEY)["signatures"][0]
    raw = f'{{"alg":"none","alg":"EdDSA","kid":"{KEY.kid}","typ":"JOSE"}}'
    entry["protected"] = b64url_encode(raw.encode())
    assert _reason({**card, "signatures": [entry]}) == "card_header_invalid"


def test_signature_by_unknown_key_is_skipped_when_a_pinned_one_verifies() -> None:
    """A card carrying a new key's signature and a pinned key's signature verifies."""
    newcomer = SigningKey.generate()
    signed = sign_card(sign_card(_card(), newcomer), KEY)
    assert len(signed["signatures"]) == 4  # each key over both forms
    assert verify_card(signed, PINNED).kid == KEY.kid


def test_rotation_keeps_old_signatures_valid(tmp_path: Path) -> None:
    """A card signed before rotation verifies with the rotated set until the old key expires."""
    keys = load_or_create(tmp_path / "keys")
    signed_before = sign_card(_card(), keys.active)
    rotated = keys.rotate(grace=timedelta(hours=1), now=NOW)
    signed_after = sign_card(_card(), rotated.active)
    trusted = rotated.trusted_keys(NOW)
    assert verify_card(signed_before, trusted, now=NOW).kid == keys.active.kid
    assert verify_card(signed_after, trusted, now=NOW).kid == rotated.active.kid
    later = NOW + timedelta(hours=2)
    assert _reason(signed_before, rotated.trusted_keys(NOW), now=later) == "card_kid_unknown"


def test_canonical_form_follows_field_presence_as_the_spec_example() -> None:
    """A2A section 8.4.1's example: defaults of fields without presence are left out,
    REQUIRED members and explicitly set optional ones are kept. The example is a
    fragment: the REQUIRED members it lacks are put back at their default, and without
    them (the v0.3 JCS form) the bytes are the example's."""
    fragment = {
        "name": "Example Agent",
        "description": "",
        "capabilities": {"streaming": False, "pushNotifications": False, "extensions": []},
        "skills": [],
    }
    example = (
        b'{"capabilities":{"pushNotifications":false,"streaming":false},'
        b'"description":"","name":"Example Agent","skills":[]}'
    )
    assert canonical_card_v03_jcs(fragment) == example
    assert canonical_card(fragment) == (
        b'{"capabilities":{"pushNotifications":false,"streaming":false},'
        b'"defaultInputModes":[],"defaultOutputModes":[],"description":"",'
        b'"name":"Example Agent","skills":[],"supportedInterfaces":[],"version":""}'
    )


def test_a_signed_card_still_verifies_after_a_trip_through_protobuf() -> None:
    """Over gRPC a default (``"required": false``, an empty list) cannot be told from
    absence; the signature covers the same bytes either way."""
    from agent_cards.bindings.grpc import a2a_pb2
    from agent_cards.bindings.protojson import proto_dict, to_proto

    card = _card()
    card["capabilities"]["extensions"] = [
        {"uri": "https://example.test/ext/v1", "required": False, "params": {"flag": False}}
    ]
    signed = sign_card(card, KEY)
    message = to_proto(AgentCard.model_validate(signed), a2a_pb2.AgentCard)
    travelled = proto_dict(message, AgentCard)
    assert "required" not in json.dumps(travelled)
    assert verify_card(travelled, PINNED)


def test_a_v03_card_signed_in_the_v03_form_verifies_only_where_that_form_is_allowed() -> None:
    """The v0.3 SDK signed sorted, compact JSON of the card without default-valued and
    empty members; that form verifies under V03_FORMS, not under the v1.0 default, and a
    changed member breaks it like any signature."""
    import jwt as pyjwt

    from agent_cards.signing import V03_FORMS, canonical_card_v03

    key = SigningKey.generate()
    card = {
        "name": "old",
        "description": "",
        "url": "http://h/rpc",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "skills": [],
        "capabilities": {"streaming": True},
    }
    header = {"alg": "EdDSA", "kid": key.kid, "typ": "JOSE"}
    compact = pyjwt.PyJWS().encode(canonical_card_v03(card), key.private_pem(), "EdDSA", header)
    protected, _, signature = compact.split(".")
    signed = {**card, "signatures": [{"protected": protected, "signature": signature}]}
    trusted = TrustedKeys([key.verification_key()])
    assert verify_card(signed, trusted, forms=V03_FORMS).kid == key.kid
    with pytest.raises(CardVerificationError):
        verify_card(signed, trusted)
    with pytest.raises(CardVerificationError):
        verify_card({**signed, "name": "other"}, trusted, forms=V03_FORMS)
