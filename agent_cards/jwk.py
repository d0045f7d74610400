"""JWK encoding, RFC 7638 thumbprints and public keys parsed from JWKs.

A key's ``kid`` is always its thumbprint computed here (:func:`thumbprint_of`); a kid a
document states is only compared with it (:func:`check_kid`), never believed. Curve,
point and lengths are checked by the ``cryptography`` library when the key is parsed;
the only hand check is the fixed coordinate length RFC 7518 section 6.2.1.2 requires.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agent_cards.jws import b64url_decode, b64url_encode

Algorithm = Literal["EdDSA", "ES256"]
ALGORITHMS: frozenset[str] = frozenset({"EdDSA", "ES256"})
DEFAULT_ALGORITHM: Algorithm = "EdDSA"
PrivateKey = Ed25519PrivateKey | ec.EllipticCurvePrivateKey
PublicKey = Ed25519PublicKey | ec.EllipticCurvePublicKey

# A kid is looked up in memory only; it is still held to a short, boring alphabet.
KID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_P256_COORDINATE_BYTES = 32
_THUMBPRINT_MEMBERS = {"OKP": ("crv", "kty", "x"), "EC": ("crv", "kty", "x", "y")}


KEY_UNUSABLE = "key_unusable"
KID_NOT_THUMBPRINT = "kid_not_thumbprint"


class KeyMaterialError(ValueError):
    """A key, JWK or key set that this module refuses to load or use, with a stable
    ``reason``: ``kid_not_thumbprint`` when a stated kid is not the key's RFC 7638
    thumbprint (a kid is computed here, never believed), else ``key_unusable``."""

    def __init__(self, message: str, reason: str = KEY_UNUSABLE) -> None:
        super().__init__(message)
        self.reason = reason


# --- encoding helpers ------------------------------------------------------------------------


def _int_to_b64(value: int) -> str:
    return b64url_encode(value.to_bytes(_P256_COORDINATE_BYTES, "big"))


# --- JWK and thumbprint ----------------------------------------------------------------------


def algorithm_of(key: PrivateKey | PublicKey) -> Algorithm:
    """The one algorithm a key may be used with, or :class:`KeyMaterialError`."""
    if isinstance(key, Ed25519PrivateKey | Ed25519PublicKey):
        return "EdDSA"
    if isinstance(key.curve, ec.SECP256R1):
        return "ES256"
    raise KeyMaterialError(f"curve {key.curve.name} is not allowed; use Ed25519 or P-256")


def public_jwk_members(key: PublicKey) -> dict[str, str]:
    """The RFC 7638 required members of ``key``'s public JWK (kty, crv, x and, for EC, y)."""
    if isinstance(key, Ed25519PublicKey):
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"crv": "Ed25519", "kty": "OKP", "x": b64url_encode(raw)}
    algorithm_of(key)
    numbers = key.public_numbers()
    return {
        "crv": "P-256",
        "kty": "EC",
        "x": _int_to_b64(numbers.x),
        "y": _int_to_b64(numbers.y),
    }


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638 thumbprint: SHA-256 over the required members, sorted, without whitespace."""
    kty = jwk.get("kty")
    required = _THUMBPRINT_MEMBERS.get(kty) if isinstance(kty, str) else None
    if required is None:
        raise KeyMaterialError(f"no thumbprint rule for kty {jwk.get('kty')!r}")
    members = {name: jwk[name] for name in required}
    canonical = json.dumps(members, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return b64url_encode(hashlib.sha256(canonical.encode("utf-8")).digest())


def thumbprint_of(key: PublicKey) -> str:
    """The RFC 7638 thumbprint of a parsed public key: the only way a kid comes to be."""
    return jwk_thumbprint(public_jwk_members(key))


def check_kid(stated: object, key: PublicKey) -> str:
    """``key``'s thumbprint; a ``stated`` kid (None: absent) must be exactly that."""
    computed = thumbprint_of(key)
    if stated is not None and stated != computed:
        shown = stated if isinstance(stated, str) and KID_PATTERN.fullmatch(stated) else "?"
        raise KeyMaterialError(
            f"stated kid {shown!r} is not the key's RFC 7638 thumbprint {computed!r}",
            KID_NOT_THUMBPRINT,
        )
    return computed


# --- public keys from JWKs ------------------------------------------------------------------


def public_key_from_jwk(jwk: Mapping[str, Any]) -> PublicKey:
    kty, crv = jwk.get("kty"), jwk.get("crv")
    try:
        if kty == "OKP" and crv == "Ed25519":
            return Ed25519PublicKey.from_public_bytes(b64url_decode(text_member(jwk, "x")))
        if kty == "EC" and crv == "P-256":
            x = int.from_bytes(coordinate(jwk, "x"), "big")
            y = int.from_bytes(coordinate(jwk, "y"), "big")
            return ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise key_error(exc) from None
    raise KeyMaterialError(f"key type {kty!r}/{crv!r} is not allowed; use OKP/Ed25519 or EC/P-256")


def text_member(jwk: Mapping[str, Any], name: str) -> str:
    value = jwk.get(name)
    if not isinstance(value, str):
        raise KeyMaterialError(f"JWK member {name!r} must be a string")
    return value


def coordinate(jwk: Mapping[str, Any], name: str) -> bytes:
    data = b64url_decode(text_member(jwk, name))
    if len(data) != _P256_COORDINATE_BYTES:
        raise KeyMaterialError(f"JWK member {name!r} must be {_P256_COORDINATE_BYTES} bytes")
    return data


def key_error(exc: Exception) -> KeyMaterialError:
    """The one place where cryptography's and base64's exceptions become ours."""
    if isinstance(exc, KeyMaterialError):
        return exc
    if isinstance(exc, UnsupportedAlgorithm):
        return KeyMaterialError(f"unsupported key: {exc}")
    return KeyMaterialError(f"unreadable key material: {exc}")
