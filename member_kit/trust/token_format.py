"""The delegation token's format, checked before any key is looked up: pure rules.

A token is three base64url segments in their one canonical spelling; header and claims
are strict JSON objects in UTF-8 (no byte order mark, no UTF-16); the header names only
``alg``, ``kid`` and ``typ``, with an allowed algorithm, the delegation type and a
thumbprint-shaped kid; every required claim is present with its JSON type. Each failure
is a :class:`~member_kit.trust.denials.DelegationDenied` with its stable reason.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from typing import Any

from agent_cards.keys import ALGORITHMS, KID_PATTERN, VerificationKey, b64url_decode
from agent_cards.signatures.primitive import verify
from contracts import strict_json
from member_kit.trust.denials import DenialReason as R
from member_kit.trust.denials import deny

DELEGATION_TOKEN_TYPE = "delegation+jwt"
ALLOWED_HEADER_MEMBERS = frozenset({"alg", "kid", "typ"})
REQUIRED_CLAIMS = (
    "iss",
    "sub",
    "aud",
    "iat",
    "nbf",
    "exp",
    "jti",
    "act",
    "scope",
    "tenant",
    "handoff",
)
NUMERIC_DATE_CLAIMS = ("iat", "nbf", "exp")
STRING_CLAIMS = ("iss", "sub", "jti", "scope", "tenant")
OBJECT_CLAIMS = ("act", "handoff")
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


_BYTE_ORDER_MARKS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def utf8_text(data: bytes) -> str:
    """A segment's bytes as UTF-8 text: one spelling only (RFC 7515 section 5.1, RFC 8259
    section 8.1), so no byte order mark, no UTF-16 or UTF-32 (their ASCII shows as NUL
    bytes, which strict JSON never holds raw), and no encoded surrogate."""
    if data.startswith(_BYTE_ORDER_MARKS):
        raise deny(R.TOKEN_ENCODING_INVALID, "a byte order mark")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise deny(R.TOKEN_ENCODING_INVALID, "not UTF-8") from None
    if "\x00" in text:
        raise deny(R.TOKEN_ENCODING_INVALID, "a NUL byte (UTF-16 or UTF-32?)")
    return text


def json_object(segment: str) -> dict[str, Any]:
    value = strict_json.loads(utf8_text(b64url_decode(segment)))
    if not isinstance(value, dict):
        raise deny(R.TOKEN_MALFORMED, "a segment is not a JSON object")
    return value


def checked_header(header: dict[str, Any], typ: str = DELEGATION_TOKEN_TYPE) -> tuple[str, str]:
    """``alg`` and ``kid`` of a header naming only alg, kid and typ, of type ``typ``."""
    extra = sorted(set(header) - ALLOWED_HEADER_MEMBERS)
    if extra:
        raise deny(R.HEADER_NOT_ALLOWED, f"not allowed: {', '.join(extra)}")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        raise deny(R.ALGORITHM_NOT_ALLOWED, "alg must be EdDSA or ES256")
    if header.get("typ") != typ:
        raise deny(R.TYPE_MISMATCH, f"typ must be {typ}")
    kid = header.get("kid")
    if not isinstance(kid, str) or not KID_PATTERN.fullmatch(kid):
        raise deny(R.KID_INVALID)
    return alg, kid


class VerifiedHeaders:
    """The ``alg`` and ``kid`` of header segments whose tokens verified, so that the
    header an issuer's key writes on every token is decoded and checked once.

    :meth:`checked` answers what :func:`checked_header` answers for the segment (a pure
    function of its text), from memory when a token with this very segment verified.
    Only :meth:`verified` adds a segment, after a pinned key verified its signature, so
    a stranger cannot fill the memory; it holds at most ``limit`` segments (an issuer
    writes one per key) and starts again when full."""

    def __init__(self, typ: str = DELEGATION_TOKEN_TYPE, limit: int = 64) -> None:
        self._typ = typ
        self._limit = limit
        self._known: dict[str, tuple[str, str]] = {}

    def checked(self, segment: str) -> tuple[str, str]:
        known = self._known.get(segment)
        return known if known is not None else checked_header(json_object(segment), self._typ)

    def verified(self, segment: str, alg: str, kid: str) -> None:
        if segment not in self._known:
            if len(self._known) >= self._limit:
                self._known.clear()
            self._known[segment] = (alg, kid)


def check_signature(signing_input: str, signature_segment: str, key: VerificationKey) -> None:
    """The JWS signature over ``header.payload`` verifies with ``key`` and its one algorithm.

    The segments were already decoded strictly (canonical unpadded base64url, strict JSON)
    and the header checked, which is everything PyJWS's ``decode_complete`` would do again
    before the signature itself, which :func:`agent_cards.signatures.primitive.verify` checks.
    """
    signature = b64url_decode(signature_segment)
    if not verify(key, signing_input.encode("ascii"), signature):
        raise deny(R.SIGNATURE_INVALID)


def check_claim_types(claims: Mapping[str, Any]) -> None:
    for name in REQUIRED_CLAIMS:
        if name not in claims:
            raise deny(R.CLAIM_MISSING, name)
    for name in NUMERIC_DATE_CLAIMS:
        value = claims[name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise deny(R.CLAIM_TYPE_INVALID, f"{name} must be an integer NumericDate")
    for name in STRING_CLAIMS:
        if not isinstance(claims[name], str):
            raise deny(R.CLAIM_TYPE_INVALID, f"{name} must be a string")
    for name in OBJECT_CLAIMS:
        if not isinstance(claims[name], dict):
            raise deny(R.CLAIM_TYPE_INVALID, f"{name} must be an object")
    if isinstance(claims["aud"], list):
        raise deny(R.AUDIENCE_MISMATCH, "aud must be one string, not an array")
    if not isinstance(claims["aud"], str):
        raise deny(R.CLAIM_TYPE_INVALID, "aud must be a string")
