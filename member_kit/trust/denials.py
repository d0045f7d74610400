"""Why a delegation token is refused: the one exception that carries a refusal's stable
reason code, and where foreign errors become refusals.

The codes and their HTTP status are the protocol's (:mod:`contracts.refusals`, the single
table, which docs/delegation-token.md mirrors; re-exported here). :func:`denial_from` is
the one place where PyJWT, JSON, base64 and pydantic errors become denials.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Mapping
from typing import Any

import jwt
from pydantic import ValidationError

from agent_cards.storage.faults import RETRY_AFTER_SECONDS
from contracts import strict_json
from contracts.grant import IDENTIFIER_PATTERN, claims_digest
from contracts.refusals import REASONS, DenialReason, ReasonInfo
from member_kit.trust.replay import ReplayGuardUnavailable

__all__ = ["REASONS", "DelegationDenied", "DenialReason", "ReasonInfo", "denial_from", "deny"]

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
R = DenialReason


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
