"""The signature of a JWS, made and checked: libsodium's Ed25519, cryptography's ES256.

A JWS signature (RFC 7515) is over the ASCII signing input ``header.payload``. Two
algorithms are pinned (:data:`agent_cards.jwk.ALGORITHMS`), each key bound to one:

``EdDSA``  Ed25519 through libsodium (PyNaCl), about twice OpenSSL's speed for the same
           deterministic signature bytes; a signature is exactly 64 bytes.
``ES256``  P-256 with SHA-256 through ``cryptography``, in the JWS form (RFC 7518
           section 3.4): ``r || s``, 32 bytes each, never DER.

:func:`sign` and :func:`verify` take the project's key objects, which keep the raw key
bytes libsodium needs (:attr:`agent_cards.keys.SigningKey.ed25519_secret`,
:attr:`agent_cards.trusted.VerificationKey.ed25519_public`), derived once per key.
Verification answers a bool: a signature that does not verify is an answer, and each
caller turns it into its own reason code.
"""

from __future__ import annotations

from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from nacl.bindings import crypto_sign, crypto_sign_open, crypto_sign_seed_keypair
from nacl.exceptions import BadSignatureError

from agent_cards.jws import b64url_encode
from agent_cards.keys import SigningKey
from agent_cards.trusted import VerificationKey

__all__ = [
    "SIGNATURE_BYTES",
    "sign",
    "sign_ed25519",
    "signed_compact",
    "verify",
    "verify_ed25519",
]

SIGNATURE_BYTES = 64  # both algorithms: Ed25519's R || S, ES256's r || s
_ES256_HALF = 32
_ECDSA = ec.ECDSA(hashes.SHA256())


def sign(key: SigningKey, message: bytes) -> bytes:
    """The JWS signature of ``message`` by ``key`` with its one algorithm."""
    if key.alg == "EdDSA":
        return crypto_sign(message, key.ed25519_secret)[:SIGNATURE_BYTES]
    assert isinstance(key.private_key, ec.EllipticCurvePrivateKey)
    r, s = decode_dss_signature(key.private_key.sign(message, _ECDSA))
    return r.to_bytes(_ES256_HALF, "big") + s.to_bytes(_ES256_HALF, "big")


def verify(key: VerificationKey, message: bytes, signature: bytes, alg: Any = None) -> bool:
    """Whether ``signature`` over ``message`` verifies with ``key``; ``alg`` (a header's
    algorithm, when given) must be the key's one algorithm, or nothing verifies."""
    if (alg is not None and alg != key.alg) or len(signature) != SIGNATURE_BYTES:
        return False
    if key.alg == "EdDSA":
        return _sodium_verifies(key.ed25519_public, message, signature)
    assert isinstance(key.public_key, ec.EllipticCurvePublicKey)
    return _es256_verifies(key.public_key, message, signature)


def signed_compact(signing_input: str, key: SigningKey) -> str:
    """The compact JWS ``signing_input.signature`` (``signing_input``: ``header.payload``)."""
    return f"{signing_input}.{b64url_encode(sign(key, signing_input.encode('ascii')))}"


def sign_ed25519(private_key: Ed25519PrivateKey, message: bytes) -> bytes:
    """:func:`sign` for a bare Ed25519 key (the ledger's), its raw bytes derived per call."""
    _, secret = crypto_sign_seed_keypair(_seed(private_key))
    return crypto_sign(message, secret)[:SIGNATURE_BYTES]


def verify_ed25519(public_key: Ed25519PublicKey, message: bytes, signature: bytes) -> bool:
    """:func:`verify` for a bare Ed25519 public key."""
    if len(signature) != SIGNATURE_BYTES:
        return False
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _sodium_verifies(raw, message, signature)


def _sodium_verifies(public: bytes, message: bytes, signature: bytes) -> bool:
    """libsodium's check of a 64-byte signature (its caller checked the length: the
    combined form would otherwise read message bytes as signature)."""
    try:
        crypto_sign_open(signature + message, public)
    except BadSignatureError:
        return False
    return True


def _es256_verifies(public: ec.EllipticCurvePublicKey, message: bytes, signature: bytes) -> bool:
    r = int.from_bytes(signature[:_ES256_HALF], "big")
    s = int.from_bytes(signature[_ES256_HALF:], "big")
    try:
        public.verify(encode_dss_signature(r, s), message, _ECDSA)
    except InvalidSignature:
        return False
    return True


def _seed(private_key: Ed25519PrivateKey) -> bytes:
    return private_key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
