"""Keys and signatures of the ledger: JWKs, RFC 7638 thumbprints, compact JWS, signed chain heads.

Everything the ledger signs is a compact JWS with ``alg`` EdDSA (Ed25519), a ``typ`` that
names what it is, and the signer's RFC 7638 thumbprint as ``kid``. A signed *chain head*
(:func:`sign_head`) names the last event's ``seq`` and ``hash``; what a chain cannot show
on its own is that events were cut off its end, and a head signed earlier reveals that.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import jwt
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from jwt.algorithms import OKPAlgorithm

from agent_cards.clock import utc_now
from agent_cards.signatures.pyjwt_framing import JWT
from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import timestamp
from coordinator.errors import LedgerError

HEAD_TYP = "ledger-head+jwt"


def public_jwk(key: Ed25519PublicKey | Ed25519PrivateKey) -> dict[str, str]:
    """The public JWK (OKP, Ed25519) of a key, with its RFC 7638 thumbprint as ``kid``."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    jwk = OKPAlgorithm.to_jwk(public, as_dict=True)
    members = {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}
    return {**members, "kid": thumbprint(members), "alg": "EdDSA", "use": "sig"}


def thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638 thumbprint of an OKP key: SHA-256 over its required members, base64url."""
    members = {name: jwk[name] for name in ("crv", "kty", "x")}
    digest = hashlib.sha256(rfc8785.dumps(members)).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def public_key_of(key: Ed25519PublicKey | Mapping[str, Any]) -> tuple[Ed25519PublicKey, str]:
    if isinstance(key, Ed25519PublicKey):
        return key, thumbprint(public_jwk(key))
    if "d" in key or key.get("kty") != "OKP" or key.get("crv") != "Ed25519":
        raise LedgerError("the key is not a public Ed25519 JWK", "head_invalid")
    public = OKPAlgorithm.from_jwk(dict(key))
    if not isinstance(public, Ed25519PublicKey):
        raise LedgerError("the key is not a public Ed25519 JWK", "head_invalid")
    computed = thumbprint(public_jwk(public))
    if key.get("kid", computed) != computed:
        raise LedgerError("the JWK's kid is not its RFC 7638 thumbprint", "kid_not_thumbprint")
    return public, computed


def sign(claims: dict[str, Any], private_key: Ed25519PrivateKey, typ: str) -> str:
    kid = thumbprint(public_jwk(private_key))
    return JWT.encode(claims, private_key, algorithm="EdDSA", headers={"typ": typ, "kid": kid})


def verified_claims(
    token: str, key: Ed25519PublicKey | Mapping[str, Any], typ: str
) -> dict[str, Any]:
    public, kid = public_key_of(key)
    try:
        decoded = JWT.decode_complete(token, public, algorithms=["EdDSA"])
    except jwt.PyJWTError as exc:
        raise LedgerError(f"signature does not verify: {exc}", "head_invalid") from None
    header = decoded["header"]
    if header.get("typ") != typ or header.get("kid") != kid:
        raise LedgerError(f"expected typ {typ} signed by key {kid}", "head_invalid")
    claims: dict[str, Any] = decoded["payload"]
    return claims


def head_claims(seq: int, digest: str, issuer: str, now: datetime | None) -> dict[str, Any]:
    return {"seq": seq, "hash": digest, "issued_at": timestamp(now or utc_now()), "iss": issuer}


def sign_head(
    ledger: Ledger,
    private_key: Ed25519PrivateKey,
    *,
    issuer: str = "coordinator",
    now: datetime | None = None,
) -> dict[str, Any]:
    """Sign the current chain head: ``{seq, hash, issued_at, iss, kid, jws}``."""
    seq, digest = ledger.head()
    claims = head_claims(seq, digest, issuer, now)
    return {
        **claims,
        "kid": thumbprint(public_jwk(private_key)),
        "jws": sign(claims, private_key, HEAD_TYP),
    }


def verify_head(token: str, public_key: Ed25519PublicKey | Mapping[str, Any]) -> dict[str, Any]:
    """The claims of a signed head, or ``head_invalid``."""
    claims = verified_claims(token, public_key, HEAD_TYP)
    if not (
        isinstance(claims.get("seq"), int)
        and isinstance(claims.get("hash"), str)
        and isinstance(claims.get("issued_at"), str)
        and isinstance(claims.get("iss"), str)
    ):
        raise LedgerError("a signed head needs seq, hash, issued_at and iss", "head_invalid")
    return claims
