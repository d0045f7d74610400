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
   ``kid`` is a plain string (the answer for a header segment whose token verified is
   remembered: an issuer's key writes the same header text on every token);
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
8. ``aud`` one of this service's identities (a single string; an array is refused):
   the RFC 9278 thumbprint URI of one of its own card-signing keys, which the service
   derives from its keys (:meth:`member_kit.settings.MemberSettings.audiences`), never from a
   URL in a card;
9. ``act`` depth, then the full grant shape (a service that spends model requests
   requires the budget claim to name ``model_requests``);
10. tenant, scope, effect budget and handoff binding against the request;
11. for a request that creates a task, the ``jti`` claimed once in the replay guard.

Between steps 9 and 10, with a :class:`~member_kit.trust.revocation.Revocations`, a
token whose handoff its issuer revoked (by a signed push or in the status list the token
names) is refused (``token_revoked``), on every binding, since every binding calls this.

Tokens are never logged or put into messages; :func:`claims_digest` gives a stable
reference for audit records instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agent_cards.clock import utc_now
from agent_cards.keys import TrustedKeys, VerificationKey
from contracts.grant import (
    DEFAULT_MAX_ACT_DEPTH,
    Grant,
    act_depth,
    claims_digest,
)
from member_kit.trust import token_format
from member_kit.trust.denials import (
    REASONS,
    DelegationDenied,
    DenialReason,
    ReasonInfo,
    denial_from,
    deny,
)
from member_kit.trust.denials import DenialReason as R
from member_kit.trust.holder_proof import (
    HolderRequest,
    ProofReplay,
    ProofReplayGuard,
    check_holder,
)
from member_kit.trust.replay import (
    Clock,
    InMemoryReplayGuard,
    ReplayGuard,
    ReplayGuardUnavailable,
)
from member_kit.trust.revocation import Revocations

DEFAULT_MAX_TOKEN_BYTES = 8192
DEFAULT_MAX_LIFETIME = timedelta(minutes=10)
DEFAULT_LEEWAY = timedelta(seconds=30)
MAX_LEEWAY = timedelta(minutes=2)

# This service's identities at a time: every aud a token for it may name.
Audiences = Callable[[datetime], Set[str]]

__all__ = [
    "REASONS",
    "Authenticated",
    "DelegationDenied",
    "DelegationVerifier",
    "DenialReason",
    "ReasonInfo",
    "VerifiedDelegation",
    "claims_digest",
]


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
class Authenticated:
    """A token whose signature, times, audience and claims passed, not yet held against
    any request (see :meth:`DelegationVerifier.authenticate`)."""

    token: str = field(repr=False)
    grant: Grant
    key: VerificationKey
    claims_digest: str


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
        audience: str | Audiences,
        *,
        clock: Clock = utc_now,
        max_lifetime: timedelta = DEFAULT_MAX_LIFETIME,
        leeway: timedelta = DEFAULT_LEEWAY,
        max_act_depth: int = DEFAULT_MAX_ACT_DEPTH,
        max_token_bytes: int = DEFAULT_MAX_TOKEN_BYTES,
        replay_guard: ReplayGuard | None = None,
        require_model_budget: bool = False,
        revocations: Revocations | None = None,
        proof_replay: ProofReplay | None = None,
    ) -> None:
        """``require_model_budget``: this service spends model requests on the work, so a
        token must bound them (``handoff.budget.model_requests``); a budget claim without
        that limit is wider than any grant that has one, and is refused."""
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
        # kept as given: an IssuerDirectory changes its keys when it refreshes them
        self._issuers = trusted_issuers
        self._audiences = audience if callable(audience) else _fixed(audience)
        self._clock = clock
        self._max_lifetime = int(max_lifetime.total_seconds())
        self._leeway = int(leeway.total_seconds())
        self._max_act_depth = max_act_depth
        self._max_token_bytes = max_token_bytes
        if replay_guard is None:
            replay_guard = InMemoryReplayGuard(clock, leeway=leeway)
        self._replay = replay_guard
        self._require_model_budget = require_model_budget
        self.revocations = revocations
        self._proofs = proof_replay if proof_replay is not None else ProofReplayGuard()
        self._headers = token_format.VerifiedHeaders()

    def authenticate(self, token: str | None, holder: HolderRequest | None = None) -> Authenticated:
        """Every check that does not depend on the request (steps 1 to 9 and the grant's
        shape), or :class:`DelegationDenied`. The HTTP edge calls this on the headers
        alone, before any body is read; :meth:`verify` then takes the result."""
        try:
            return self._authenticate(token, holder)
        except Exception as exc:
            raise denial_from(exc) from None

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
        authenticated: Authenticated | None = None,
        holder: HolderRequest | None = None,
    ) -> VerifiedDelegation:
        """The verified delegation for this request, or :class:`DelegationDenied`.

        ``handoff_id`` is the handoff named in the message (``None`` when the request
        names none, e.g. a task lookup); ``tenant``, when given, must equal the token's.
        ``creates_task`` claims the token's ``jti`` so it can create one task only; a
        caller that decides later whether a task is created passes ``False`` and calls
        :meth:`claim_task_creation` then. ``authenticated``, the result of
        :meth:`authenticate` for this very token, spares checking the signature twice.
        """
        scopes = frozenset(required_scopes)
        if not scopes:
            raise ValueError("a skill must require at least one scope")
        request = _Request(skill_id, scopes, handoff_id, read_only, tenant, creates_task)
        try:
            if authenticated is None or authenticated.token != token:
                authenticated = self._authenticate(token, holder)
            return self._for_request(authenticated, request)
        except Exception as exc:
            raise denial_from(exc) from None

    def _authenticate(self, token: str | None, holder: HolderRequest | None) -> Authenticated:
        now = self._clock()
        token = self._shaped(token)
        header_segment, payload_segment, signature_segment = token.split(".")
        alg, kid = self._headers.checked(header_segment)
        claims = token_format.json_object(payload_segment)
        issuer = self._issuer_of(claims)
        key = self._key(issuer, kid, alg, now)
        token_format.check_signature(f"{header_segment}.{payload_segment}", signature_segment, key)
        self._headers.verified(header_segment, alg, kid)
        try:
            grant = self._admit(claims, issuer, now)
            check_holder(grant, token, holder, int(now.timestamp()), self._leeway, self._proofs)
            return Authenticated(token, grant, key, claims_digest(claims))
        except Exception as exc:
            raise denial_from(exc).signed(claims) from None

    def _admit(self, claims: dict[str, Any], issuer: str, now: datetime) -> Grant:
        """The steps after the signature: types, times, audience, act depth, grant shape."""
        token_format.check_claim_types(claims)
        if claims["iss"] != issuer:
            raise deny(R.ISSUER_MISMATCH)
        self._check_times(claims, int(now.timestamp()))
        if claims["aud"] not in self._audiences(now):
            raise deny(R.AUDIENCE_MISMATCH, "the token is meant for another service")
        if _act_depth(claims["act"]) > self._max_act_depth:
            raise deny(R.ACT_CHAIN_TOO_DEEP, f"limit is {self._max_act_depth}")
        grant = Grant.model_validate(claims)
        if self._require_model_budget and grant.handoff.budget.model_requests is None:
            raise deny(R.MODEL_BUDGET_UNBOUNDED, "a missing model-request limit counts as wider")
        if self.revocations is not None:
            self.revocations.admit(grant)
        return grant

    def _for_request(self, authenticated: Authenticated, request: _Request) -> VerifiedDelegation:
        """The request binding: tenant, scopes, effects, handoff; then the jti claim."""
        grant, key = authenticated.grant, authenticated.key
        try:
            _check_request(
                grant, request.scopes, request.handoff_id, request.read_only, request.tenant
            )
            verified = VerifiedDelegation(
                grant, key.kid, key.alg, request.skill_id, authenticated.claims_digest
            )
            if request.creates_task:
                self._claim(verified, again=False)
        except Exception as exc:
            denial = denial_from(exc)
            denial.jti, denial.claims_digest = grant.jti, authenticated.claims_digest
            raise denial from None
        return verified

    def claim_task_creation(self, verified: VerifiedDelegation, *, again: bool = False) -> None:
        """Claim a verified token's ``jti`` for creating one task, or raise
        :class:`DelegationDenied` (``replayed_jti``, or ``replay_guard_unavailable``).
        ``again``: the claim is made again after a write that held it failed with its
        outcome unknown (the answer to its commit lost, say), so a ``jti`` found taken may
        be this very claim, committed: that is ``replay_guard_unavailable``, not a replay."""
        try:
            self._claim(verified, again=again)
        except Exception as exc:
            grant = verified.grant
            denial = denial_from(exc)
            denial.jti, denial.claims_digest = grant.jti, verified.claims_digest
            raise denial from None

    def _claim(self, verified: VerifiedDelegation, *, again: bool) -> None:
        grant = verified.grant
        if not self._replay.claim_task_creation(grant.jti, grant.exp, issuer=grant.iss):
            if again:  # maybe claimed by its own earlier write: undecided, as the guard's fault
                raise ReplayGuardUnavailable("the token's claim may have been recorded already")
            raise deny(R.REPLAYED_JTI)
        if self.revocations is not None:  # joins the claim's (the task's) transaction
            self.revocations.keep(grant)

    def _shaped(self, token: str | None) -> str:
        if not token:
            raise deny(R.TOKEN_MISSING)
        if not isinstance(token, str):
            raise deny(R.TOKEN_MALFORMED, "the token is not text")
        if len(token) > self._max_token_bytes:
            raise deny(R.TOKEN_TOO_LARGE, f"cap is {self._max_token_bytes} bytes")
        if not token_format.TOKEN_SHAPE.fullmatch(token):
            raise deny(R.TOKEN_MALFORMED, "not three unpadded base64url segments")
        return token

    def _issuer_of(self, unverified: dict[str, Any]) -> str:
        issuer = unverified.get("iss")
        if issuer is None:
            raise deny(R.CLAIM_MISSING, "iss")
        if not isinstance(issuer, str):
            raise deny(R.CLAIM_TYPE_INVALID, "iss must be a string")
        if issuer not in self._issuers:
            raise deny(R.ISSUER_UNKNOWN)
        return issuer

    def _key(self, issuer: str, kid: str, alg: str, now: datetime) -> VerificationKey:
        key = self._issuers[issuer].get(kid, at=now)
        if key is None:
            denial = deny(R.KID_UNKNOWN, "not a pinned, unexpired key of this issuer")
            denial.issuer = issuer
            raise denial
        if key.alg != alg:
            raise deny(R.ALGORITHM_NOT_ALLOWED, f"this key signs with {key.alg} only")
        return key

    def _check_times(self, claims: Mapping[str, Any], now: int) -> None:
        if claims["exp"] <= now - self._leeway:
            raise deny(R.TOKEN_EXPIRED)
        if claims["nbf"] > now + self._leeway:
            raise deny(R.TOKEN_NOT_YET_VALID)
        if claims["iat"] > now + self._leeway:
            raise deny(R.ISSUED_IN_FUTURE)
        if not claims["iat"] <= claims["nbf"] < claims["exp"]:
            raise deny(R.VALIDITY_WINDOW_INVALID, "the token can never be valid")
        if claims["exp"] - claims["iat"] > self._max_lifetime:
            raise deny(R.LIFETIME_TOO_LONG, f"limit is {self._max_lifetime} s")


def _fixed(audience: str) -> Audiences:
    """One identity, whatever the time (a verifier whose caller names it)."""
    identities = frozenset({audience})
    return lambda _now: identities


def _act_depth(act: Mapping[str, Any]) -> int:
    try:
        return act_depth(act)
    except TypeError:
        raise deny(R.CLAIM_TYPE_INVALID, "every act level must be an object") from None


def _check_request(
    grant: Grant,
    scopes: frozenset[str],
    handoff_id: str | None,
    read_only: bool,
    tenant: str | None,
) -> None:
    if tenant is not None and grant.tenant != tenant:
        raise deny(R.TENANT_MISMATCH)
    missing = sorted(scopes - grant.scopes)
    if missing:
        raise deny(R.SCOPE_INSUFFICIENT, f"missing: {' '.join(missing)}")
    if read_only and grant.handoff.budget.effects != 0:
        raise deny(R.EFFECTS_NOT_ALLOWED)
    if handoff_id is not None and grant.handoff.id != handoff_id:
        raise deny(R.HANDOFF_MISMATCH)
