"""Delegation tokens for tests: valid claims, and compact JWS forged by hand.

Malformed tokens are written by hand (base64url of hand-written JSON, signed with
cryptography) because PyJWT refuses to produce most of them. Shared by the verifier's
attack table and the HTTP attack table of the running service.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from agent_cards.keys import SigningKey, b64url_encode

COORDINATOR_KEY = SigningKey.generate("EdDSA")
COORDINATOR_SECOND_KEY = SigningKey.generate("EdDSA")
OTHER_ISSUER_KEY = SigningKey.generate("ES256")
ATTACKER_KEY = SigningKey.generate("EdDSA")
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
P384_KEY = ec.generate_private_key(ec.SECP384R1())

# A change to DROP removes the member.
DROP = object()


def changed(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``base`` with ``changes`` applied; a change to :data:`DROP` removes it."""
    result = dict(base)
    for name, value in changes.items():
        if value is DROP:
            del result[name]
        else:
            result[name] = value
    return result


def delegation_claims(
    *,
    now: int,
    issuer: str,
    audience: str,
    scope: str,
    tenant: str = "tenant-a",
    handoff_id: str = "handoff-7",
    jti: str = "jti-1",
    sub: str = "alice",
) -> dict[str, Any]:
    """Valid child claims issued ten seconds before ``now`` and valid for five minutes."""
    return {
        "iss": issuer,
        "sub": sub,
        "aud": audience,
        "iat": now - 10,
        "nbf": now - 10,
        "exp": now + 290,
        "jti": jti,
        "act": {"sub": audience, "act": {"sub": issuer}},
        "scope": scope,
        "tenant": tenant,
        "handoff": {
            "id": handoff_id,
            "attempt": 1,
            "duplicate_key": "brief-001:risk",
            "state_ref": {"id": "state-1", "version": 3},
            "final_owner": issuer,
            "budget": {"actions": 2, "context_units": 40, "effects": 0},
        },
    }


def with_budget(claims: dict[str, Any], **budget: int) -> dict[str, Any]:
    """``claims`` with members of ``handoff.budget`` replaced."""
    handoff = claims["handoff"]
    return {**claims, "handoff": {**handoff, "budget": {**handoff["budget"], **budget}}}


def with_handoff(claims: dict[str, Any], **members: Any) -> dict[str, Any]:
    """``claims`` with members of ``handoff`` replaced."""
    return {**claims, "handoff": {**claims["handoff"], **members}}


def header(key: SigningKey = COORDINATOR_KEY, **changes: Any) -> dict[str, Any]:
    """The profile's header for ``key`` with ``changes`` applied."""
    return changed({"alg": key.alg, "typ": "delegation+jwt", "kid": key.kid}, **changes)


def segment(value: dict[str, Any] | str) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return b64url_encode(text.encode("utf-8"))


def sign(alg: str, signing_input: bytes, key: Any) -> bytes:
    """A raw JWS signature with ``alg``; ``none`` (or anything unknown) gives no bytes."""
    if alg == "EdDSA":
        return bytes(key.sign(signing_input))
    if alg in ("ES256", "ES384"):
        digest = hashes.SHA256() if alg == "ES256" else hashes.SHA384()
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(digest)))
        size = (key.curve.key_size + 7) // 8
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
    if alg == "RS256":
        return bytes(key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256()))
    if alg == "HS256":
        return hmac.new(key, signing_input, hashlib.sha256).digest()
    return b""


def forge(
    head: dict[str, Any] | str,
    payload: dict[str, Any] | str,
    *,
    key: Any = None,
    alg: str | None = None,
) -> str:
    """A compact JWS built by hand: any header, any payload, signed with any key."""
    signing_input = f"{segment(head)}.{segment(payload)}"
    if alg is None:
        alg = (
            head["alg"] if isinstance(head, dict) and isinstance(head.get("alg"), str) else "EdDSA"
        )
    signer = COORDINATOR_KEY.private_key if key is None else key
    signature = sign(alg, signing_input.encode("ascii"), signer)
    return f"{signing_input}.{b64url_encode(signature)}"


def swap_payload(token: str, payload: dict[str, Any]) -> str:
    head, _, signature = token.split(".")
    return f"{head}.{segment(payload)}.{signature}"


def alter_signature(token: str) -> str:
    head, body, signature = token.split(".")
    first = "B" if signature[0] != "B" else "C"
    return f"{head}.{body}.{first}{signature[1:]}"


def act_chain(depth: int) -> dict[str, Any]:
    act: dict[str, Any] | None = None
    for hop in range(depth):
        act = {"sub": f"agent-{hop}", **({"act": act} if act else {})}
    assert act is not None
    return act


def public_key_bytes(key: SigningKey = COORDINATOR_KEY) -> bytes:
    return key.private_key.public_key().public_bytes_raw()  # type: ignore[union-attr]


def duplicate_member(document: dict[str, Any], name: str, value: Any) -> str:
    """JSON text of ``document`` with ``name`` repeated at the end (lax parsers keep the last)."""
    return json.dumps(document)[:-1] + f", {json.dumps(name)}: {json.dumps(value)}}}"
