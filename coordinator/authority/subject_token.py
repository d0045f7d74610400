"""The subject token of an exchange: a live delegation token this owner signed.

The token a holder presents (``subject_token``, RFC 8693) is checked here before anything
else of the exchange (:mod:`coordinator.authority.exchange`): a compact JWS of a delegation
token, signed by one of the owner's own keys, naming the owner as issuer, not expired.
"""

from __future__ import annotations

from pydantic import ValidationError

from agent_cards.keys import KeySet, b64url_decode
from agent_cards.signatures.primitive import verify
from agent_cards.trusted import VerificationKey
from contracts import strict_json
from contracts.grant import Grant
from coordinator.authority.holder_proof import ExchangeRefused
from coordinator.authority.tokens import DELEGATION_TOKEN_TYPE


def verified_own_token(token: str, keys: KeySet, issuer: str, now: int) -> Grant:
    """``token``'s grant if it is a delegation token this owner signed and it is live;
    else :class:`ExchangeRefused` (``subject_token_invalid``, ``subject_token_expired``)."""
    parts = token.split(".")
    try:
        header = strict_json.loads(b64url_decode(parts[0]).decode("utf-8"))
        claims = strict_json.loads(b64url_decode(parts[1]).decode("utf-8"))
    except (ValueError, IndexError, UnicodeDecodeError):
        raise _bad_subject("the subject token is not a compact JWS") from None
    if len(parts) != 3 or not isinstance(header, dict) or not isinstance(claims, dict):
        raise _bad_subject("the subject token is not a compact JWS")
    if header.get("typ") != DELEGATION_TOKEN_TYPE or set(header) != {"alg", "kid", "typ"}:
        raise _bad_subject("the subject token is no delegation token")
    key = next((k for k in keys.verification_keys() if k.kid == header.get("kid")), None)
    if key is None or header.get("alg") != key.alg or not _signed(parts, key):
        raise _bad_subject("the subject token is not signed by this owner")
    try:
        grant = Grant.model_validate(claims)
    except ValidationError:
        raise _bad_subject("the subject token's claims are not a grant") from None
    if grant.iss != issuer:
        raise _bad_subject("the subject token names another issuer")
    if grant.exp <= now:
        raise ExchangeRefused(401, "subject_token_expired", "the subject token has expired")
    return grant


def _signed(parts: list[str], key: VerificationKey) -> bool:
    try:
        return verify(key, f"{parts[0]}.{parts[1]}".encode("ascii"), b64url_decode(parts[2]))
    except ValueError:
        return False


def _bad_subject(message: str) -> ExchangeRefused:
    return ExchangeRefused(401, "subject_token_invalid", message)
