"""Agent Card signatures: a detached JWS over the card's RFC 8785 canonical form.

The signed payload is the card without ``signatures`` and without null members, with
proto field presence as A2A section 8.4.1 says (:func:`canonical_card`,
:func:`agent_cards.presence.card_with_presence`), canonicalised with JCS. Each entry in
``signatures`` holds the base64url ``protected`` header ``{"alg", "kid", "typ": "JOSE"}``
and the base64url ``signature``; the payload itself is not stored, since anyone can
recompute it from the card.

Signers in the field use one of two deterministic forms, and a v1.0 card verifies over
either (:data:`V1_FORMS`; :func:`verify_card` says which one did):

``a2a-v1.0``  the specification's (:func:`canonical_card`): REQUIRED members always
              present (at their default when the JSON leaves them out), map entries kept
              whatever their value, other defaults left out
``a2a-sdk``   the a2a-sdk's (:func:`canonical_card_sdk`): the card as the protobuf
              message prints, then without any empty string, list or object, at any
              depth. It signs less: a requirement naming a scheme with no scopes, an
              mTLS scheme without a description, an empty description are not covered.

:func:`sign_card` signs the specification's form and, when the a2a-sdk's form of the card
is other bytes, adds a second entry over that one with the same key, so the a2a-sdk's
verifier accepts our cards too. A v0.3 card may instead be signed over the JCS form
without put-back members (``a2a-v0.3-jcs``) or the form the v0.3 SDK produced
(:func:`canonical_card_v03`, ``a2a-v0.3``: without members equal to v0.3's defaults or
empty, as sorted, compact JSON); :data:`V03_FORMS` accepts those two.

Verification trusts pinned keys only. Key-locating header members (``jku``, ``x5u``,
``jwk``, ``x5c``) are refused outright rather than ignored: the A2A specification lets a
signer name a JWK Set URL, but this project never lets a document choose its own trust
root, and a card that asks for one is treated as not meant for pinned verification. An
operator sees a clear ``card_header_invalid`` instead of a silently unused hint.

Reason codes, each stable for logs and tests:

``card_unsigned``           no ``signatures`` entry at all
``card_header_invalid``     an entry's protected header is unreadable or outside the profile
``card_kid_unknown``        no entry names a pinned, unexpired key
``card_signature_invalid``  an entry names a pinned key, but no signature verifies
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import jwt
import rfc8785

from agent_cards.keys import (
    ALGORITHMS,
    KID_PATTERN,
    SigningKey,
    TrustedKeys,
    VerificationKey,
    b64url_decode,
    b64url_encode,
)
from agent_cards.presence import card_as_sdk_signs, card_with_presence, without_empty
from agent_cards.signatures.primitive import sign
from agent_cards.signatures.pyjwt_framing import decode_complete
from contracts import strict_json

CardReason = Literal[
    "card_unsigned",
    "card_signature_invalid",
    "card_kid_unknown",
    "card_header_invalid",
]
CARD_SIGNATURE_TYPE = "JOSE"
ALLOWED_HEADER_MEMBERS = frozenset({"alg", "kid", "typ"})


class CardVerificationError(Exception):
    """A card that is not signed by a pinned key, with a stable ``reason`` code."""

    def __init__(self, reason: CardReason, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason: CardReason = reason


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [_without_nulls(item) for item in value]
    return value


def _unsigned(card: Mapping[str, Any]) -> dict[str, Any]:
    unsigned = {key: value for key, value in card.items() if key != "signatures"}
    return dict(_without_nulls(unsigned))


def canonical_card(card: Mapping[str, Any]) -> bytes:
    """The bytes that are signed (A2A section 8.4.1): JCS of ``card`` without
    ``signatures``, null members, and the members proto field presence leaves out, with
    absent REQUIRED members at their default (:mod:`agent_cards.presence`), so a card
    reads the same over every binding and however its JSON was printed."""
    return rfc8785.dumps(card_with_presence(_unsigned(card)))


def canonical_card_sdk(card: Mapping[str, Any]) -> bytes | None:
    """The bytes the a2a-sdk signs: JCS of the card as its protobuf message prints,
    without empty values (:func:`agent_cards.presence.card_as_sdk_signs`); None for a
    card the proto cannot read."""
    printed = card_as_sdk_signs(_unsigned(card))
    try:
        return None if printed is None else rfc8785.dumps(printed)
    except rfc8785.CanonicalizationError:
        return None


def canonical_card_v03_jcs(card: Mapping[str, Any]) -> bytes:
    """JCS with field presence as v1.0 reads it, nothing put back (how a v0.3 card
    signed over JCS was checked before v1.0's rule about REQUIRED members)."""
    return rfc8785.dumps(card_with_presence(_unsigned(card), fill_required=False))


# Members whose value equals the v0.3 schema's default were left out of what v0.3 signed.
V03_DEFAULTS = {"protocolVersion": "0.3.0", "preferredTransport": "JSONRPC"}


def canonical_card_v03(card: Mapping[str, Any]) -> bytes:
    """The bytes a v0.3 signer signed: the card without ``signatures``, default-valued and
    empty members, as JSON with sorted keys and no spaces (ASCII-escaped)."""
    unsigned = {
        key: value
        for key, value in card.items()
        if key != "signatures" and V03_DEFAULTS.get(key) != value
    }
    cleaned = without_empty(_without_nulls(unsigned)) or {}
    return json.dumps(cleaned, separators=(",", ":"), sort_keys=True).encode()


SPEC_FORM = "a2a-v1.0"
SDK_FORM = "a2a-sdk"
V03_JCS_FORM = "a2a-v0.3-jcs"
V03_FORM = "a2a-v0.3"


@dataclass(frozen=True)
class CanonicalForm:
    """One way of making a card's signed bytes: its name and the function (None when the
    card has no such form)."""

    name: str
    payload: Callable[[Mapping[str, Any]], bytes | None]


@dataclass(frozen=True)
class VerifiedCard:
    """Which pinned key signed the card (its kid) and over which canonical form."""

    kid: str
    form: str


V1_FORMS: tuple[CanonicalForm, ...] = (
    CanonicalForm(SPEC_FORM, canonical_card),
    CanonicalForm(SDK_FORM, canonical_card_sdk),
)
V03_FORMS: tuple[CanonicalForm, ...] = (
    CanonicalForm(V03_JCS_FORM, canonical_card_v03_jcs),
    CanonicalForm(V03_FORM, canonical_card_v03),
)


def sign_card(card: Mapping[str, Any], key: SigningKey) -> dict[str, Any]:
    """A copy of ``card`` with one more detached signature entry made with ``key`` over
    the specification's form, and one over the a2a-sdk's form when that is other bytes.

    Existing entries are kept, so a card can carry the old and the new key's signature
    while verifiers are moving over to the new one.
    """
    spec, sdk = canonical_card(card), canonical_card_sdk(card)
    entries = [_entry(spec, key)] + ([_entry(sdk, key)] if sdk not in (None, spec) else [])
    signed = dict(card)
    signed["signatures"] = [*(card.get("signatures") or []), *entries]
    return signed


def _entry(payload: bytes | None, key: SigningKey) -> dict[str, str]:
    assert payload is not None
    header = {"alg": key.alg, "kid": key.kid, "typ": CARD_SIGNATURE_TYPE}
    protected = b64url_encode(strict_json.dumps(header))
    signing_input = f"{protected}.{b64url_encode(payload)}".encode("ascii")
    signature = sign(key, signing_input)
    return {"protected": protected, "signature": b64url_encode(signature)}


def verify_card(
    card: Mapping[str, Any],
    trusted: TrustedKeys,
    *,
    now: datetime | None = None,
    forms: tuple[CanonicalForm, ...] = V1_FORMS,
) -> VerifiedCard:
    """The ``kid`` of the first signature that verifies with a pinned, unexpired key, and
    the name of the first of ``forms`` it verifies over.

    Every entry must have a well-formed protected header inside the profile, or the
    card is refused with ``card_header_invalid`` even if another entry would verify.
    Entries naming keys that are not pinned are skipped, which lets a card carry a
    signature from a key the verifier has not been given yet.
    """
    entries = card.get("signatures")
    if not isinstance(entries, list) or not entries:
        raise CardVerificationError("card_unsigned", "the card has no signatures")
    headers = [_protected_header(entry) for entry in entries]
    payloads = _payloads(card, forms)
    at = now or datetime.now(UTC)
    pinned_seen = False
    for entry, header in zip(entries, headers, strict=True):
        key = trusted.get(header["kid"], at=at)
        if key is None:
            continue
        pinned_seen = True
        for name, payload in payloads:
            if _verifies(entry, payload, key, header["alg"]):
                return VerifiedCard(kid=key.kid, form=name)
    if not pinned_seen:
        raise CardVerificationError(
            "card_kid_unknown", "no signature names a pinned, unexpired key"
        )
    raise CardVerificationError(
        "card_signature_invalid", "no signature by a pinned key matches this card"
    )


def _payloads(card: Mapping[str, Any], forms: tuple[CanonicalForm, ...]) -> list[tuple[str, str]]:
    """Each form's name and base64url payload, once per distinct payload (first name)."""
    found: list[tuple[str, str]] = []
    for form in forms:
        payload = form.payload(card)
        encoded = None if payload is None else b64url_encode(payload)
        if encoded is not None and all(encoded != seen for _, seen in found):
            found.append((form.name, encoded))
    return found


def _protected_header(entry: Any) -> dict[str, str]:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("protected"), str):
        raise CardVerificationError("card_header_invalid", "a signature entry lacks 'protected'")
    if entry.get("header"):
        raise CardVerificationError(
            "card_header_invalid", "unprotected header members are not accepted"
        )
    try:
        header = strict_json.loads(b64url_decode(entry["protected"]))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CardVerificationError("card_header_invalid", f"unreadable header: {exc}") from None
    if not isinstance(header, dict):
        raise CardVerificationError("card_header_invalid", "the header is not a JSON object")
    extra = sorted(set(header) - ALLOWED_HEADER_MEMBERS)
    if extra:
        raise CardVerificationError(
            "card_header_invalid", f"header members not allowed: {', '.join(extra)}"
        )
    if header.get("alg") not in ALGORITHMS:
        raise CardVerificationError("card_header_invalid", "alg must be EdDSA or ES256")
    kid = header.get("kid")
    if not isinstance(kid, str) or not KID_PATTERN.fullmatch(kid):
        raise CardVerificationError("card_header_invalid", "kid must be a plain string")
    if header.get("typ") != CARD_SIGNATURE_TYPE:
        raise CardVerificationError("card_header_invalid", "typ must be 'JOSE'")
    return header


def _verifies(entry: Mapping[str, Any], payload: str, key: VerificationKey, alg: str) -> bool:
    """Whether ``entry`` is a valid signature by ``key`` over ``payload``."""
    if alg != key.alg:
        return False
    signature = entry.get("signature")
    if not isinstance(signature, str):
        return False
    compact = f"{entry['protected']}.{payload}.{signature}"
    try:
        decode_complete(compact, key)
    except Exception as exc:
        _translate(exc)
        return False
    return True


def _translate(exc: Exception) -> None:
    """The one place where PyJWT, cryptography and base64 errors meet this module.

    A failure to verify is an answer, not an error, so expected exceptions are absorbed;
    anything that is not a verification failure is a programming error and propagates.
    """
    if isinstance(exc, jwt.PyJWTError | ValueError | TypeError | binascii.Error):
        return
    raise exc
