"""Signed statements: a JSON object as a compact JWS (RFC 7515) by a service's own key.

The protected header is exactly ``{"alg", "kid", "typ"}``: ``alg`` the key's one
algorithm (EdDSA or ES256), ``kid`` its RFC 7638 thumbprint, ``typ`` what the statement
is. A verifier looks the ``kid`` up among the keys it pinned for the signer and nowhere
else, and checks ``typ`` exactly. Receipts and signed tree heads are such statements.

One rule holds for every statement: **a signature speaks only for the identity of the
key that verified it.** The claims' ``iss`` must be that identity: by default the key's
RFC 9278 thumbprint URI (:mod:`agent_cards.identity`), which is how an agent names
itself; a caller that chose the keys by a named issuer (the coordinator's heads, keyed
by the tokens' ``iss``) passes that name instead. So holding several parties' keys
never lets one of them sign in another's name (``issuer_mismatch``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jwt

from agent_cards.identity import identity_of
from agent_cards.jwk import b64url_decode, b64url_encode
from agent_cards.keys import SigningKey
from agent_cards.signatures.primitive import signed_compact, verify
from agent_cards.signatures.pyjwt_framing import decode_complete
from agent_cards.trusted import TrustedKeys, VerificationKey
from contracts import strict_json

ISSUER_MISMATCH = "issuer_mismatch"


class StatementInvalid(ValueError):
    """A statement that does not verify, or is not the kind expected: ``reason`` says why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def sign_statement(claims: Mapping[str, Any], key: SigningKey, typ: str) -> str:
    """The compact JWS of ``claims`` by ``key``: its header as PyJWT printed it (members
    sorted, compact, ASCII), so a statement is the bytes it always was."""
    payload = strict_json.dumps(dict(claims))
    return signed_compact(
        f"{protected_header(key.alg, key.kid, typ)}.{b64url_encode(payload)}", key
    )


@lru_cache(maxsize=64)
def protected_header(alg: str, kid: str, typ: str) -> str:
    """The base64url protected header of every ``typ`` statement ``kid`` signs: the same
    text for each of them, so encoded once per key and kind (a few keys live at once)."""
    header = {"alg": alg, "kid": kid, "typ": typ}
    return b64url_encode(json.dumps(header, separators=(",", ":"), sort_keys=True).encode())


def unverified_header(jws: str) -> dict[str, Any]:
    """The protected header of a compact JWS, not verified (to pick the key)."""
    try:
        header = strict_json.loads(b64url_decode(jws.split(".")[0]))
    except (ValueError, AttributeError, IndexError):
        raise StatementInvalid("malformed", "not a compact JWS") from None
    if not isinstance(header, dict):
        raise StatementInvalid("malformed", "the protected header is not a JSON object")
    return header


def verify_statement(
    jws: Any, keys: TrustedKeys, typ: str, *, issuer: str | None = None
) -> dict[str, Any]:
    """The claims of ``jws`` if one of ``keys`` signed it as a ``typ`` in its own name;
    else :class:`StatementInvalid` (``malformed``, ``untrusted_key``,
    ``signature_invalid``, ``issuer_mismatch``). Its ``iss`` must be ``issuer`` when
    given (the name the caller chose ``keys`` by), else the verifying key's identity."""
    if not isinstance(jws, str) or jws.count(".") != 2:
        raise StatementInvalid("malformed", "not a compact JWS")
    header = unverified_header(jws)
    if set(header) != {"alg", "kid", "typ"} or header["typ"] != typ:
        raise StatementInvalid("malformed", f"the header is not exactly alg, kid, typ {typ}")
    kid = header["kid"]
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        raise StatementInvalid("untrusted_key", f"signed by a key not pinned: {kid!r}")
    try:
        if header["alg"] != key.alg:
            raise ValueError(f"the key {kid} signs {key.alg}, not {header['alg']!r}")
        claims = strict_json.loads(_verified_payload(jws, key))
    except (jwt.PyJWTError, ValueError) as exc:
        raise StatementInvalid(
            "signature_invalid", f"does not verify: {exc or 'bad signature'}"
        ) from None
    if not isinstance(claims, dict):
        raise StatementInvalid("malformed", "the payload is not a JSON object")
    expected = issuer if issuer is not None else identity_of(key)
    if claims.get("iss") != expected:
        raise StatementInvalid(
            ISSUER_MISMATCH, f"signed by {expected}, but its iss names {claims.get('iss')!r}"
        )
    return claims


def _verified_payload(jws: str, key: VerificationKey) -> bytes:
    """The payload of ``jws`` once ``key`` verified its signature (segments read by the one
    strict base64url decoder). An Ed25519 key verifies the raw signature itself, without
    PyJWT's per-byte scan of the text; an ES256 statement is read by PyJWT as it always
    was, with the same signature primitive (:mod:`agent_cards.signatures.pyjwt_framing`)."""
    if key.alg != "EdDSA":
        return bytes(decode_complete(jws, key)["payload"])
    header, payload, signature = jws.split(".")
    if not verify(key, f"{header}.{payload}".encode("ascii"), b64url_decode(signature)):
        raise ValueError("bad signature")
    return b64url_decode(payload)
