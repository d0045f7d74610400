"""The one signature primitive: libsodium's Ed25519 and cryptography's ES256 agree with
what PyJWT and cryptography made and checked before, bit for bit where the algorithm is
deterministic, and refuse what they refused."""

from __future__ import annotations

import json
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import get_default_algorithms

from agent_cards.jws import b64url_encode
from agent_cards.keys import SigningKey, signing_key_from_jwk
from agent_cards.signatures.primitive import (
    sign,
    sign_ed25519,
    signed_compact,
    verify,
    verify_ed25519,
)
from agent_cards.signatures.pyjwt_framing import decode_complete
from agent_cards.transparency.statements import sign_statement
from contracts import strict_json
from coordinator.audit.log.signing import sign as ledger_sign
from coordinator.audit.log.signing import verified_claims
from coordinator.authority.tokens import mint_token
from tests.tokens import delegation_claims

MESSAGE = b"eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ0ZXN0In0"
# Fixed keys (RFC 8037 appendix A.1's Ed25519 key, a P-256 key from a fixed scalar), so
# the byte comparisons below are over the same key in every run.
ED25519_JWK = {
    "kty": "OKP",
    "crv": "Ed25519",
    "d": "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
    "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
}
ED = signing_key_from_jwk(ED25519_JWK)
EC = SigningKey.from_private_key(ec.derive_private_key(0x5EED_0F_A2A, ec.SECP256R1()))
KEYS = [ED, EC]


@pytest.mark.parametrize("key", KEYS, ids=["EdDSA", "ES256"])
def test_a_signature_made_here_verifies_with_pyjwt_and_cryptography(key: SigningKey) -> None:
    algorithm = get_default_algorithms()[key.alg]
    signature = sign(key, MESSAGE)
    public = algorithm.prepare_key(key.verification_key().public_key)
    assert algorithm.verify(MESSAGE, public, signature)


@pytest.mark.parametrize("key", KEYS, ids=["EdDSA", "ES256"])
def test_a_signature_made_by_pyjwt_and_cryptography_verifies_here(key: SigningKey) -> None:
    signature = get_default_algorithms()[key.alg].sign(MESSAGE, key.private_key)
    assert verify(key.verification_key(), MESSAGE, signature)


def test_an_ed25519_signature_is_the_bytes_openssl_makes() -> None:
    assert sign(ED, MESSAGE) == ED.private_key.sign(MESSAGE)
    bare = Ed25519PrivateKey.generate()
    assert sign_ed25519(bare, MESSAGE) == bare.sign(MESSAGE)
    assert verify_ed25519(bare.public_key(), MESSAGE, bare.sign(MESSAGE))


def _flipped(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 1]) + data[index + 1 :]


@pytest.mark.parametrize("key", KEYS, ids=["EdDSA", "ES256"])
@pytest.mark.parametrize("index", [0, 20, 63])
def test_a_flipped_bit_in_the_signature_is_refused(key: SigningKey, index: int) -> None:
    signature = sign(key, MESSAGE)
    assert not verify(key.verification_key(), MESSAGE, _flipped(signature, index))


@pytest.mark.parametrize("key", KEYS, ids=["EdDSA", "ES256"])
@pytest.mark.parametrize("index", [0, 17, len(MESSAGE) - 1])
def test_a_flipped_bit_in_the_message_is_refused(key: SigningKey, index: int) -> None:
    signature = sign(key, MESSAGE)
    assert not verify(key.verification_key(), _flipped(MESSAGE, index), signature)


@pytest.mark.parametrize("key", KEYS, ids=["EdDSA", "ES256"])
def test_a_signature_of_another_length_is_refused(key: SigningKey) -> None:
    """libsodium reads signature and message as one buffer: a short signature must not
    borrow the message's first bytes, nor a long one lend its tail to the message."""
    signature = sign(key, MESSAGE)
    public = key.verification_key()
    assert not verify(public, MESSAGE[1:], signature + MESSAGE[:1])
    assert not verify(public, MESSAGE, signature[:63])
    assert not verify(public, MESSAGE, signature + b"\0")
    assert not verify(public, MESSAGE, b"")
    assert not verify_ed25519(ED.private_key.public_key(), MESSAGE, sign(ED, MESSAGE)[:63])


def test_a_wrong_algorithm_key_or_header_is_refused() -> None:
    assert not verify(EC.verification_key(), MESSAGE, sign(ED, MESSAGE))
    assert not verify(ED.verification_key(), MESSAGE, sign(EC, MESSAGE))
    assert not verify(ED.verification_key(), MESSAGE, sign(ED, MESSAGE), alg="ES256")
    assert not verify(EC.verification_key(), MESSAGE, sign(EC, MESSAGE), alg="EdDSA")
    assert verify(ED.verification_key(), MESSAGE, sign(ED, MESSAGE), alg="EdDSA")
    # PyJWT's framing with these primitives refuses an alg other than the key's
    token = jwt.api_jws.encode(MESSAGE, ED.private_key, algorithm="EdDSA")
    with pytest.raises(jwt.InvalidAlgorithmError):
        decode_complete(token, EC.verification_key())


def test_raw_key_bytes_are_derived_once_per_key() -> None:
    key = SigningKey.generate()
    assert key.ed25519_secret is key.ed25519_secret
    assert key.verification_key().ed25519_public is key.verification_key().ed25519_public
    assert key.ed25519_secret[32:] == key.verification_key().ed25519_public
    assert EC.ed25519_secret == b"" and EC.verification_key().ed25519_public == b""


# --- the bytes on the wire: the same as PyJWT made them -------------------------------------


def _segment(value: Any) -> str:
    return b64url_encode(strict_json.dumps(value))


def test_a_statement_is_the_compact_jws_pyjwt_made() -> None:
    claims = {"iss": "urn:test", "size": 3, "root": "ab", "issued_at": "2026-12-01T12:00:00Z"}
    header = {"alg": ED.alg, "kid": ED.kid, "typ": "tree-head+jwt"}
    before = jwt.api_jws.encode(
        strict_json.dumps(claims), ED.private_key, algorithm=ED.alg, headers=header
    )
    assert sign_statement(claims, ED, "tree-head+jwt") == before


def test_a_ledger_jws_is_the_one_pyjwt_made() -> None:
    private = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    claims = {"seq": 7, "hash": "ff", "issued_at": "2026-12-01T12:00:00Z", "iss": "coordinator"}
    token = ledger_sign(claims, private, "ledger-head+jwt")
    kid = jwt.get_unverified_header(token)["kid"]
    headers = {"typ": "ledger-head+jwt", "kid": kid}
    assert token == jwt.encode(claims, private, algorithm="EdDSA", headers=headers)
    assert verified_claims(token, private.public_key(), "ledger-head+jwt") == claims


def test_a_delegation_token_and_any_compact_jws_are_the_bytes_pyjwt_signed() -> None:
    header = {"alg": ED.alg, "kid": ED.kid, "typ": "t"}
    signing_input = f"{_segment(header)}.{_segment({'a': 1})}"
    old = get_default_algorithms()["EdDSA"].sign(signing_input.encode(), ED.private_key)
    assert signed_compact(signing_input, ED) == f"{signing_input}.{b64url_encode(old)}"
    claims = delegation_claims(now=1_800_000_000, issuer="urn:c", audience="urn:m", scope="s")
    token = mint_token(claims, ED)
    head, payload, signature = token.split(".")
    old = get_default_algorithms()["EdDSA"].sign(f"{head}.{payload}".encode(), ED.private_key)
    assert signature == b64url_encode(old)
    assert json.loads(jwt.utils.base64url_decode(head)) == {
        "alg": "EdDSA",
        "kid": ED.kid,
        "typ": "delegation+jwt",
    }
