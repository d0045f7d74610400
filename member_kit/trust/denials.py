"""Why a delegation token is refused: the stable reason codes, their HTTP status, and the
one exception that carries them.

:data:`REASONS` is the single table from reason to HTTP status (docs/delegation-token.md
mirrors it): 401 when there is no usable token, 403 when a sound token does not allow the
request, 503 when the replay guard cannot record it. :func:`denial_from` is the one place
where PyJWT, JSON, base64 and pydantic errors become denials.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import jwt
from pydantic import ValidationError

from agent_cards.storage.faults import RETRY_AFTER_SECONDS
from contracts import strict_json
from contracts.grant import IDENTIFIER_PATTERN, claims_digest
from member_kit.trust.replay import ReplayGuardUnavailable

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)


class DenialReason(StrEnum):
    TOKEN_MISSING = "token_missing"
    TOKEN_MALFORMED = "token_malformed"
    TOKEN_TOO_LARGE = "token_too_large"
    HEADER_NOT_ALLOWED = "header_not_allowed"
    ALGORITHM_NOT_ALLOWED = "algorithm_not_allowed"
    TYPE_MISMATCH = "type_mismatch"
    KID_INVALID = "kid_invalid"
    KID_UNKNOWN = "kid_unknown"
    ISSUER_UNKNOWN = "issuer_unknown"
    SIGNATURE_INVALID = "signature_invalid"
    DUPLICATE_CLAIM = "duplicate_claim"
    CLAIM_MISSING = "claim_missing"
    CLAIM_TYPE_INVALID = "claim_type_invalid"
    ISSUER_MISMATCH = "issuer_mismatch"
    TOKEN_EXPIRED = "token_expired"
    TOKEN_NOT_YET_VALID = "token_not_yet_valid"
    ISSUED_IN_FUTURE = "issued_in_future"
    LIFETIME_TOO_LONG = "lifetime_too_long"
    AUDIENCE_MISMATCH = "audience_mismatch"
    REPLAYED_JTI = "replayed_jti"
    ACT_CHAIN_TOO_DEEP = "act_chain_too_deep"
    TENANT_MISMATCH = "tenant_mismatch"
    SCOPE_INSUFFICIENT = "scope_insufficient"
    EFFECTS_NOT_ALLOWED = "effects_not_allowed"
    HANDOFF_MISMATCH = "handoff_mismatch"
    REPLAY_GUARD_UNAVAILABLE = "replay_guard_unavailable"
    TOKEN_ENCODING_INVALID = "token_encoding_invalid"
    VALIDITY_WINDOW_INVALID = "validity_window_invalid"
    CONTINUATION_MISMATCH = "continuation_mismatch"
    MODEL_BUDGET_UNBOUNDED = "model_budget_unbounded"
    REQUEST_DIGEST_MISMATCH = "request_digest_mismatch"
    REQUEST_DIGEST_MISSING = "request_digest_missing"
    LOG_HEAD_INVALID = "log_head_invalid"
    TOKEN_REVOKED = "token_revoked"
    HOLDER_PROOF_MISSING = "holder_proof_missing"
    HOLDER_PROOF_INVALID = "holder_proof_invalid"
    HOLDER_KEY_MISMATCH = "holder_key_mismatch"
    HOLDER_PROOF_MISMATCH = "holder_proof_mismatch"
    HOLDER_PROOF_STALE = "holder_proof_stale"
    HOLDER_PROOF_REPLAYED = "holder_proof_replayed"


@dataclass(frozen=True)
class ReasonInfo:
    http_status: int
    meaning: str


R = DenialReason
# One declarative table from reason to HTTP status; docs/delegation-token.md mirrors it.
REASONS: Mapping[DenialReason, ReasonInfo] = {
    R.TOKEN_MISSING: ReasonInfo(401, "no delegation token was presented"),
    R.TOKEN_MALFORMED: ReasonInfo(401, "not three unpadded base64url segments of JSON"),
    R.TOKEN_TOO_LARGE: ReasonInfo(401, "longer than the size cap; nothing was decoded"),
    R.HEADER_NOT_ALLOWED: ReasonInfo(401, "a header member other than alg, typ, kid"),
    R.ALGORITHM_NOT_ALLOWED: ReasonInfo(401, "alg is not EdDSA or ES256, or not the key's alg"),
    R.TYPE_MISMATCH: ReasonInfo(401, "typ is not delegation+jwt"),
    R.KID_INVALID: ReasonInfo(401, "kid is missing, not a string, or not a plain identifier"),
    R.KID_UNKNOWN: ReasonInfo(401, "kid is not a pinned, unexpired key of the issuer"),
    R.ISSUER_UNKNOWN: ReasonInfo(401, "iss is not a trusted issuer"),
    R.SIGNATURE_INVALID: ReasonInfo(401, "the signature does not verify"),
    R.DUPLICATE_CLAIM: ReasonInfo(401, "a JSON member name repeats in header or payload"),
    R.CLAIM_MISSING: ReasonInfo(401, "a required claim is absent"),
    R.CLAIM_TYPE_INVALID: ReasonInfo(401, "a claim has the wrong JSON type or shape"),
    R.ISSUER_MISMATCH: ReasonInfo(401, "iss differs from the issuer whose key verified"),
    R.TOKEN_EXPIRED: ReasonInfo(401, "exp has passed, beyond the leeway"),
    R.TOKEN_NOT_YET_VALID: ReasonInfo(401, "nbf is in the future, beyond the leeway"),
    R.ISSUED_IN_FUTURE: ReasonInfo(401, "iat is in the future, beyond the leeway"),
    R.LIFETIME_TOO_LONG: ReasonInfo(401, "exp - iat exceeds the maximum lifetime"),
    R.AUDIENCE_MISMATCH: ReasonInfo(401, "aud is not exactly this service's identifier"),
    R.REPLAYED_JTI: ReasonInfo(401, "this token already created a task"),
    R.ACT_CHAIN_TOO_DEEP: ReasonInfo(403, "more act hops than the depth limit"),
    R.TENANT_MISMATCH: ReasonInfo(403, "tenant differs from the tenant of the request"),
    R.SCOPE_INSUFFICIENT: ReasonInfo(403, "scope lacks a scope the skill requires"),
    R.EFFECTS_NOT_ALLOWED: ReasonInfo(403, "effect budget above 0 for a read-only skill"),
    R.HANDOFF_MISMATCH: ReasonInfo(403, "handoff.id differs from the handoff of the message"),
    R.REPLAY_GUARD_UNAVAILABLE: ReasonInfo(503, "the replay guard cannot record the token"),
    R.TOKEN_ENCODING_INVALID: ReasonInfo(401, "header or payload is not UTF-8 without BOM"),
    R.VALIDITY_WINDOW_INVALID: ReasonInfo(401, "iat <= nbf < exp does not hold"),
    R.CONTINUATION_MISMATCH: ReasonInfo(
        403, "the continued task was opened under another handoff binding"
    ),
    R.MODEL_BUDGET_UNBOUNDED: ReasonInfo(
        403, "the service spends model requests and the budget claim names no model_requests"
    ),
    R.REQUEST_DIGEST_MISMATCH: ReasonInfo(
        403, "the message is not the one whose digest the token binds (req_digest)"
    ),
    R.REQUEST_DIGEST_MISSING: ReasonInfo(403, "the token binds no request digest (req_digest)"),
    R.LOG_HEAD_INVALID: ReasonInfo(401, "log_head is not a tree head signed by the issuer"),
    R.TOKEN_REVOKED: ReasonInfo(401, "the issuer revoked the grant (push or status list)"),
    R.HOLDER_PROOF_MISSING: ReasonInfo(401, "the token names a holder key (cnf) and no DPoP proof"),
    R.HOLDER_PROOF_INVALID: ReasonInfo(401, "the DPoP proof is not a well-formed, signed proof"),
    R.HOLDER_KEY_MISMATCH: ReasonInfo(401, "the proof's key is not the key cnf.jkt names"),
    R.HOLDER_PROOF_MISMATCH: ReasonInfo(401, "htm, htu or ath is not this request or token"),
    R.HOLDER_PROOF_STALE: ReasonInfo(401, "the proof's iat is too old or in the future"),
    R.HOLDER_PROOF_REPLAYED: ReasonInfo(401, "this proof (its key and jti) was already used"),
}


class DelegationDenied(Exception):
    """A refused request: a stable ``reason``, its ``http_status``, a detail without secrets."""

    def __init__(self, reason: DenialReason, detail: str = "") -> None:
        self.reason = reason
        self.http_status = REASONS[reason].http_status
        self.detail = detail or REASONS[reason].meaning
        # Set only when the signature verified, so that audit can name the refused token.
        self.jti: str | None = None
        self.claims_digest: str | None = None
        self._signed = False
        # For kid_unknown: the (unverified) issuer whose keys lacked the kid, so that a
        # caller may refresh that issuer's keys and try once more.
        self.issuer: str | None = None
        # Seconds after which the same request is worth sending again, when known.
        self.retry_after: float | None = None
        super().__init__(f"{reason.value}: {self.detail}")

    def signed(self, claims: Mapping[str, Any]) -> DelegationDenied:
        """This denial, noting the ``jti`` and digest of claims whose signature verified."""
        self._signed = True
        jti = claims.get("jti")
        self.jti = jti if isinstance(jti, str) and _IDENTIFIER.fullmatch(jti) else None
        try:
            self.claims_digest = claims_digest(claims)
        except Exception:  # e.g. an integer JCS cannot represent; the digest is optional
            self.claims_digest = None
        return self

    @property
    def of_authenticated_party(self) -> bool:
        """Whether the refused token's signature verified with a known issuer's key:
        :meth:`signed` noted its claims, or a check after the signature named its ``jti``
        (every such check does). Only such a refusal is a decision the decision log keeps;
        the rest are strangers' (:mod:`member_kit.trust.decisions`)."""
        return self._signed or self.jti is not None

    def www_authenticate(self) -> str:
        """The RFC 6750 challenge for this denial."""
        error = "insufficient_scope" if self.http_status == 403 else "invalid_token"
        return f'Bearer error="{error}", error_description="{self.reason.value}"'


def deny(reason: DenialReason, detail: str = "") -> DelegationDenied:
    return DelegationDenied(reason, detail)


def denial_from(exc: Exception) -> DelegationDenied:
    """The one place where PyJWT, JSON, base64 and pydantic errors become denials.

    Anything not recognised is still a denial (401), never a server error: a foreign
    exception escaping a verifier must not turn a bad token into a 500.
    """
    if isinstance(exc, DelegationDenied):
        return exc
    if isinstance(exc, strict_json.StrictJSONError):
        if str(exc).startswith("duplicate key"):
            return deny(R.DUPLICATE_CLAIM, str(exc))
        return deny(R.TOKEN_MALFORMED, "a segment is not strict JSON")
    if isinstance(exc, jwt.InvalidSignatureError):
        return deny(R.SIGNATURE_INVALID)
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return deny(R.ALGORITHM_NOT_ALLOWED)
    if isinstance(exc, ValidationError):
        fields = ", ".join(".".join(map(str, err["loc"])) for err in exc.errors())
        return deny(R.CLAIM_TYPE_INVALID, f"invalid claims: {fields}")
    if isinstance(exc, ReplayGuardUnavailable):
        denial = deny(R.REPLAY_GUARD_UNAVAILABLE)
        denial.retry_after = RETRY_AFTER_SECONDS  # the database may take writes by then
        return denial
    if isinstance(exc, jwt.PyJWTError | ValueError | binascii.Error | UnicodeDecodeError):
        return deny(R.TOKEN_MALFORMED, type(exc).__name__)
    return deny(R.TOKEN_MALFORMED, f"unexpected {type(exc).__name__}")
