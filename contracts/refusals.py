"""Why a member refuses a delegation token: the protocol's stable refusal codes and the
HTTP status of each.

The codes are the wire contract between a coordinator and its members: a member names one
in the ErrorInfo ``reason`` of a delegation refusal (-32090 / -32091 / -32092), and a
coordinator records a refusal by its code only when it is one of these
(docs/delegation-token.md mirrors the table). 401 when there is no usable token, 403 when
a sound token does not allow the request, 503 when the replay guard cannot record it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


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


# Every refusal code, as the text a refusal states.
REFUSAL_CODES: frozenset[str] = frozenset(reason.value for reason in DenialReason)
