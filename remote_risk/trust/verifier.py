"""The delegation-token check a remote specialist runs on every request.

:meth:`DelegationVerifier.verify` takes the compact token and the facts of the request
(which skill, which scopes it needs, which handoff the message names, whether the skill
only reads) and returns a :class:`VerifiedDelegation` or raises :class:`DelegationDenied`
with a stable reason code and an HTTP status: 401 when there is no usable token, 403 when
the token is sound but does not allow this request.

The checks run in a fixed order, cheapest and least trusting first:

1. size cap and charset of the raw token (three base64url segments, no padding);
2. the unverified header, UTF-8 without a byte order mark, parsed with duplicate
   members refused: only ``alg``, ``typ``
   and ``kid`` may appear, ``alg`` is EdDSA or ES256, ``typ`` is ``delegation+jwt``,
   ``kid`` is a plain string;
3. the payload, UTF-8 without BOM, parsed once with duplicate members refused; its
   ``iss`` read (not yet
   trusted) only to choose that issuer's pinned keys, then ``kid`` looked up among those
   keys and nowhere else;
4. the signature over the exact header and payload segments, with the one algorithm that
   key is bound to (PyJWT's algorithm object, with the key already parsed); only then
   are the claims parsed in step 3 trusted, as they are those very bytes;
5. (no second parse: the signed bytes are the ones step 3 parsed strictly);
6. presence and JSON types of every claim (a NumericDate is an integer, never a string
   or a boolean), then ``iss`` equal to the issuer whose key verified;
7. ``exp``, ``nbf`` and ``iat`` with the leeway, then the window itself
   (``iat <= nbf < exp``: a token that can never be valid is refused), and the maximum
   lifetime;
8. ``aud`` equal to this service's identifier (a single string; an array is refused);
9. ``act`` depth, then the full grant shape;
10. tenant, scope, effect budget and handoff binding against the request;
11. for a request that creates a task, the ``jti`` claimed once in the replay guard.

Tokens are never logged or put into messages; :func:`claims_digest` gives a stable
reference for audit records instead.
"""

from __future__ import annotations

import binascii
import codecs
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import jwt
from pydantic import ValidationError

from agent_cards.keys import ALGORITHMS, KID_PATTERN, TrustedKeys, VerificationKey, b64url_decode
from contracts import strict_json
from contracts.grant import (
    DEFAULT_MAX_ACT_DEPTH,
    IDENTIFIER_PATTERN,
    Grant,
    act_depth,
    claims_digest,
)
from remote_risk.trust.replay import (
    Clock,
    InMemoryReplayGuard,
    ReplayGuard,
    ReplayGuardUnavailable,
    utc_now,
)

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
DEFAULT_MAX_TOKEN_BYTES = 8192
DEFAULT_MAX_LIFETIME = timedelta(minutes=10)
DEFAULT_LEEWAY = timedelta(seconds=30)
MAX_LEEWAY = timedelta(minutes=2)
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")

__all__ = [
    "REASONS",
    "DelegationDenied",
    "DelegationVerifier",
    "DenialReason",
    "VerifiedDelegation",
    "claims_digest",
]


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
        super().__init__(f"{reason.value}: {self.detail}")

    def signed(self, claims: Mapping[str, Any]) -> DelegationDenied:
        """This denial, noting the ``jti`` and digest of claims whose signature verified."""
        jti = claims.get("jti")
        self.jti = jti if isinstance(jti, str) and _IDENTIFIER.fullmatch(jti) else None
        try:
            self.claims_digest = claims_digest(claims)
        except Exception:  # e.g. an integer JCS cannot represent; the digest is optional
            self.claims_digest = None
        return self

    def www_authenticate(self) -> str:
        """The RFC 6750 challenge for this denial."""
        error = "insufficient_scope" if self.http_status == 403 else "invalid_token"
        return f'Bearer error="{error}", error_description="{self.reason.value}"'


def _deny(reason: DenialReason, detail: str = "") -> DelegationDenied:
    return DelegationDenied(reason, detail)


def _denial_from(exc: Exception) -> DelegationDenied:
    """The one place where PyJWT, JSON, base64 and pydantic errors become denials.

    Anything not recognised is still a denial (401), never a server error: a foreign
    exception escaping a verifier must not turn a bad token into a 500.
    """
    if isinstance(exc, DelegationDenied):
        return exc
    if isinstance(exc, strict_json.StrictJSONError):
        if str(exc).startswith("duplicate key"):
            return _deny(R.DUPLICATE_CLAIM, str(exc))
        return _deny(R.TOKEN_MALFORMED, "a segment is not strict JSON")
    if isinstance(exc, jwt.InvalidSignatureError):
        return _deny(R.SIGNATURE_INVALID)
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return _deny(R.ALGORITHM_NOT_ALLOWED)
    if isinstance(exc, ValidationError):
        fields = ", ".join(".".join(map(str, err["loc"])) for err in exc.errors())
        return _deny(R.CLAIM_TYPE_INVALID, f"invalid claims: {fields}")
    if isinstance(exc, ReplayGuardUnavailable):
        return _deny(R.REPLAY_GUARD_UNAVAILABLE)
    if isinstance(exc, jwt.PyJWTError | ValueError | binascii.Error | UnicodeDecodeError):
        return _deny(R.TOKEN_MALFORMED, type(exc).__name__)
    return _deny(R.TOKEN_MALFORMED, f"unexpected {type(exc).__name__}")


@dataclass(frozen=True)
class _Request:
    """The facts of the request a token is checked against."""

    skill_id: str
    scopes: frozenset[str]
    handoff_id: str | None
    read_only: bool
    tenant: str | None
    creates_task: bool


@dataclass(frozen=True)
class VerifiedDelegation:
    """A token that passed every check, with what the service needs to act and to audit."""

    grant: Grant
    kid: str
    alg: str
    skill_id: str
    claims_digest: str

    @property
    def current_actor(self) -> str:
        """RFC 8693: only the outermost actor counts for access decisions."""
        assert self.grant.act is not None
        return self.grant.act.sub


class DelegationVerifier:
    """Checks delegation tokens minted by trusted issuers for one audience (this service)."""

    def __init__(
        self,
        trusted_issuers: Mapping[str, TrustedKeys],
        audience: str,
        *,
        clock: Clock = utc_now,
        max_lifetime: timedelta = DEFAULT_MAX_LIFETIME,
        leeway: timedelta = DEFAULT_LEEWAY,
        max_act_depth: int = DEFAULT_MAX_ACT_DEPTH,
        max_token_bytes: int = DEFAULT_MAX_TOKEN_BYTES,
        replay_guard: ReplayGuard | None = None,
    ) -> None:
        if not trusted_issuers or not all(
            isinstance(k, TrustedKeys) for k in trusted_issuers.values()
        ):
            raise ValueError("trusted_issuers maps each issuer to its TrustedKeys")
        if not audience:
            raise ValueError("the verifier needs this service's audience identifier")
        if not timedelta(0) <= leeway <= MAX_LEEWAY:
            raise ValueError(f"leeway must be between 0 and {MAX_LEEWAY}")
        if max_lifetime <= timedelta(0) or max_act_depth < 1 or max_token_bytes < 1:
            raise ValueError("max_lifetime, max_act_depth and max_token_bytes must be positive")
        self._issuers = dict(trusted_issuers)
        self._audience = audience
        self._clock = clock
        self._max_lifetime = int(max_lifetime.total_seconds())
        self._leeway = int(leeway.total_seconds())
        self._max_act_depth = max_act_depth
        self._max_token_bytes = max_token_bytes
        if replay_guard is None:
            replay_guard = InMemoryReplayGuard(clock, leeway=leeway)
        self._replay = replay_guard

    def verify(
        self,
        token: str | None,
        *,
        skill_id: str,
        required_scopes: Iterable[str],
        handoff_id: str | None,
        read_only: bool,
        tenant: str | None = None,
        creates_task: bool = False,
    ) -> VerifiedDelegation:
        """The verified delegation for this request, or :class:`DelegationDenied`.

        ``handoff_id`` is the handoff named in the message (``None`` when the request
        names none, e.g. a task lookup); ``tenant``, when given, must equal the token's.
        ``creates_task`` claims the token's ``jti`` so it can create one task only; a
        caller that decides later whether a task is created passes ``False`` and calls
        :meth:`claim_task_creation` then.
        """
        scopes = frozenset(required_scopes)
        if not scopes:
            raise ValueError("a skill must require at least one scope")
        request = _Request(skill_id, scopes, handoff_id, read_only, tenant, creates_task)
        try:
            return self._verify(token, request)
        except Exception as exc:
            raise _denial_from(exc) from None

    def _verify(self, token: str | None, request: _Request) -> VerifiedDelegation:
        now = self._clock()
        token = self._shaped(token)
        header_segment, payload_segment, signature_segment = token.split(".")
        alg, kid = _checked_header(_json_object(header_segment))
        claims = _json_object(payload_segment)
        issuer = self._issuer_of(claims)
        key = self._key(issuer, kid, alg, now)
        _check_signature(f"{header_segment}.{payload_segment}", signature_segment, key)
        try:
            return self._admit(claims, issuer, key, now, request)
        except Exception as exc:
            raise _denial_from(exc).signed(claims) from None

    def _admit(
        self,
        claims: dict[str, Any],
        issuer: str,
        key: VerificationKey,
        now: datetime,
        request: _Request,
    ) -> VerifiedDelegation:
        """The steps after the signature: types, times, audience, grant, request binding."""
        _check_claim_types(claims)
        if claims["iss"] != issuer:
            raise _deny(R.ISSUER_MISMATCH)
        self._check_times(claims, int(now.timestamp()))
        if claims["aud"] != self._audience:
            raise _deny(R.AUDIENCE_MISMATCH, "the token is meant for another service")
        if _act_depth(claims["act"]) > self._max_act_depth:
            raise _deny(R.ACT_CHAIN_TOO_DEEP, f"limit is {self._max_act_depth}")
        grant = Grant.model_validate(claims)
        _check_request(grant, request.scopes, request.handoff_id, request.read_only, request.tenant)
        verified = VerifiedDelegation(
            grant, key.kid, key.alg, request.skill_id, claims_digest(claims)
        )
        if request.creates_task:
            self._claim(verified)
        return verified

    def claim_task_creation(self, verified: VerifiedDelegation) -> None:
        """Claim a verified token's ``jti`` for creating one task, or raise
        :class:`DelegationDenied` (``replayed_jti``, or ``replay_guard_unavailable``)."""
        try:
            self._claim(verified)
        except Exception as exc:
            grant = verified.grant
            denial = _denial_from(exc)
            denial.jti, denial.claims_digest = grant.jti, verified.claims_digest
            raise denial from None

    def _claim(self, verified: VerifiedDelegation) -> None:
        grant = verified.grant
        if not self._replay.claim_task_creation(grant.jti, grant.exp, issuer=grant.iss):
            raise _deny(R.REPLAYED_JTI)

    def _shaped(self, token: str | None) -> str:
        if not token:
            raise _deny(R.TOKEN_MISSING)
        if not isinstance(token, str):
            raise _deny(R.TOKEN_MALFORMED, "the token is not text")
        if len(token) > self._max_token_bytes:
            raise _deny(R.TOKEN_TOO_LARGE, f"cap is {self._max_token_bytes} bytes")
        if not _TOKEN_SHAPE.fullmatch(token):
            raise _deny(R.TOKEN_MALFORMED, "not three unpadded base64url segments")
        return token

    def _issuer_of(self, unverified: dict[str, Any]) -> str:
        issuer = unverified.get("iss")
        if issuer is None:
            raise _deny(R.CLAIM_MISSING, "iss")
        if not isinstance(issuer, str):
            raise _deny(R.CLAIM_TYPE_INVALID, "iss must be a string")
        if issuer not in self._issuers:
            raise _deny(R.ISSUER_UNKNOWN)
        return issuer

    def _key(self, issuer: str, kid: str, alg: str, now: datetime) -> VerificationKey:
        key = self._issuers[issuer].get(kid, at=now)
        if key is None:
            raise _deny(R.KID_UNKNOWN, "not a pinned, unexpired key of this issuer")
        if key.alg != alg:
            raise _deny(R.ALGORITHM_NOT_ALLOWED, f"this key signs with {key.alg} only")
        return key

    def _check_times(self, claims: Mapping[str, Any], now: int) -> None:
        if claims["exp"] <= now - self._leeway:
            raise _deny(R.TOKEN_EXPIRED)
        if claims["nbf"] > now + self._leeway:
            raise _deny(R.TOKEN_NOT_YET_VALID)
        if claims["iat"] > now + self._leeway:
            raise _deny(R.ISSUED_IN_FUTURE)
        if not claims["iat"] <= claims["nbf"] < claims["exp"]:
            raise _deny(R.VALIDITY_WINDOW_INVALID, "the token can never be valid")
        if claims["exp"] - claims["iat"] > self._max_lifetime:
            raise _deny(R.LIFETIME_TOO_LONG, f"limit is {self._max_lifetime} s")


def _act_depth(act: Mapping[str, Any]) -> int:
    try:
        return act_depth(act)
    except TypeError:
        raise _deny(R.CLAIM_TYPE_INVALID, "every act level must be an object") from None


_BYTE_ORDER_MARKS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def _utf8_text(data: bytes) -> str:
    """A segment's bytes as UTF-8 text: one spelling only (RFC 7515 section 5.1, RFC 8259
    section 8.1), so no byte order mark, no UTF-16 or UTF-32 (their ASCII shows as NUL
    bytes, which strict JSON never holds raw), and no encoded surrogate."""
    if data.startswith(_BYTE_ORDER_MARKS):
        raise _deny(R.TOKEN_ENCODING_INVALID, "a byte order mark")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _deny(R.TOKEN_ENCODING_INVALID, "not UTF-8") from None
    if "\x00" in text:
        raise _deny(R.TOKEN_ENCODING_INVALID, "a NUL byte (UTF-16 or UTF-32?)")
    return text


def _json_object(segment: str) -> dict[str, Any]:
    value = strict_json.loads(_utf8_text(b64url_decode(segment)))
    if not isinstance(value, dict):
        raise _deny(R.TOKEN_MALFORMED, "a segment is not a JSON object")
    return value


def _checked_header(header: dict[str, Any]) -> tuple[str, str]:
    extra = sorted(set(header) - ALLOWED_HEADER_MEMBERS)
    if extra:
        raise _deny(R.HEADER_NOT_ALLOWED, f"not allowed: {', '.join(extra)}")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        raise _deny(R.ALGORITHM_NOT_ALLOWED, "alg must be EdDSA or ES256")
    if header.get("typ") != DELEGATION_TOKEN_TYPE:
        raise _deny(R.TYPE_MISMATCH, f"typ must be {DELEGATION_TOKEN_TYPE}")
    kid = header.get("kid")
    if not isinstance(kid, str) or not KID_PATTERN.fullmatch(kid):
        raise _deny(R.KID_INVALID)
    return alg, kid


_JWS = jwt.PyJWS()  # only to look up PyJWT's algorithm objects


def _check_signature(signing_input: str, signature_segment: str, key: VerificationKey) -> None:
    """The JWS signature over ``header.payload`` verifies with ``key`` and its one algorithm.

    The segments were already decoded strictly (canonical unpadded base64url, strict JSON)
    and the header checked, which is everything PyJWS's ``decode_complete`` would do again
    before the same algorithm object's ``verify``.
    """
    algorithm = _JWS.get_algorithm_by_name(key.alg)
    prepared = algorithm.prepare_key(key.public_key)
    signature = b64url_decode(signature_segment)
    if not algorithm.verify(signing_input.encode("ascii"), prepared, signature):
        raise _deny(R.SIGNATURE_INVALID)


def _check_claim_types(claims: Mapping[str, Any]) -> None:
    for name in REQUIRED_CLAIMS:
        if name not in claims:
            raise _deny(R.CLAIM_MISSING, name)
    for name in NUMERIC_DATE_CLAIMS:
        value = claims[name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise _deny(R.CLAIM_TYPE_INVALID, f"{name} must be an integer NumericDate")
    for name in STRING_CLAIMS:
        if not isinstance(claims[name], str):
            raise _deny(R.CLAIM_TYPE_INVALID, f"{name} must be a string")
    for name in OBJECT_CLAIMS:
        if not isinstance(claims[name], dict):
            raise _deny(R.CLAIM_TYPE_INVALID, f"{name} must be an object")
    if isinstance(claims["aud"], list):
        raise _deny(R.AUDIENCE_MISMATCH, "aud must be one string, not an array")
    if not isinstance(claims["aud"], str):
        raise _deny(R.CLAIM_TYPE_INVALID, "aud must be a string")


def _check_request(
    grant: Grant,
    scopes: frozenset[str],
    handoff_id: str | None,
    read_only: bool,
    tenant: str | None,
) -> None:
    if tenant is not None and grant.tenant != tenant:
        raise _deny(R.TENANT_MISMATCH)
    missing = sorted(scopes - grant.scopes)
    if missing:
        raise _deny(R.SCOPE_INSUFFICIENT, f"missing: {' '.join(missing)}")
    if read_only and grant.handoff.budget.effects != 0:
        raise _deny(R.EFFECTS_NOT_ALLOWED)
    if handoff_id is not None and grant.handoff.id != handoff_id:
        raise _deny(R.HANDOFF_MISMATCH)
