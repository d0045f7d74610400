"""The delegation check in front of every JSON-RPC call: may this caller ask this, and as whom.

:func:`delegation_authorizer` builds the ``authorize`` hook of
:class:`~member_kit.server.jsonrpc.JSONRPCEndpoint`. For each request it

1. takes the Bearer token from ``Authorization`` (none, or another scheme: ``token_missing``);
2. works out what the request asks for: for ``SendMessage`` the skill
   (``message.metadata.skillId``, default the card's only skill), the handoff
   (``message.metadata.handoffId``, required), the attempt, and whether it creates a task
   (no ``message.taskId``); for every other method a lookup under the default skill;
3. has :class:`~member_kit.trust.verifier.DelegationVerifier` check the token against that;
   a continuation (``message.taskId``) must carry the handoff binding (id and attempt) of
   the task it continues, else ``continuation_mismatch``; its principal is the task's
   owner, since another principal's task reads as not found;
4. answers with the :class:`~member_kit.server.jsonrpc.CallContext` whose owner is the token's
   principal ``(iss, sub, tenant)`` with its handoff id (:func:`owner_of`). The task
   store is scoped by owner, so another principal's task, or a task of another handoff,
   reads as not found. For a request that may create a task the context
   carries ``claim_task_creation``, which claims the token's ``jti`` (one token, one task);
   the handler calls it only once it knows a task will be created, so a retried send
   answered with its existing task (same idempotency key) does not count as a replay.

A refusal becomes :class:`~member_kit.errors.DelegationRefused`: HTTP 401, 403 or 503
with a ``WWW-Authenticate`` challenge and a JSON-RPC error whose ErrorInfo metadata holds
the stable reason code (and, for a ``kid_unknown`` of an issuer whose keys are refreshed,
when to try again). Every decision goes to the
:class:`~member_kit.trust.decisions.DecisionLog`, which enters one about a token whose
signature verified (allowed or not, with its claims digest and ``jti``) in the decision
log and only counts a stranger's refusal; the token is never stored, logged or sent back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from contracts.grant import SkillAuthority
from contracts.wire import AgentCard, JSONObject
from member_kit import errors
from member_kit.server.authorization.asked import (
    SENDING_METHODS,
    Asked,
    TaskBinding,
    asked,
    bearer_token,
    owner_of,
    skill_authorities,
)
from member_kit.server.jsonrpc import Authorize, CallContext
from member_kit.trust.decisions import DecisionLog, allowed
from member_kit.trust.holder_proof import PROOF_HEADER, HolderRequest, request_url
from member_kit.trust.refresh import IssuerDirectory
from member_kit.trust.request_checks import check_request_digest
from member_kit.trust.verifier import (
    REASONS,
    Authenticated,
    DelegationDenied,
    DelegationVerifier,
    DenialReason,
    VerifiedDelegation,
)

# Where the HTTP edge leaves the token it authenticated from the headers (scope["state"]).
AUTHENTICATED_STATE = "delegation.authenticated"
# The method of a request refused before its body was read is not known.
BODY_NOT_READ = "(body not read)"
_HIDDEN_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
# The URL a holder's proof names, for the few paths a member serves (not split per request).
_request_url = functools.lru_cache(maxsize=64)(request_url)


# --- the hook --------------------------------------------------------------------------------


class DelegationAuthorizer:
    """The ``authorize`` hook: verify the delegation token, decide the owner, record it."""

    def __init__(
        self,
        verifier: DelegationVerifier,
        skills: Mapping[str, SkillAuthority],
        decisions: DecisionLog,
        task_binding: TaskBinding | None = None,
        issuers: IssuerDirectory | None = None,
        require_request_digest: bool = False,
        witness: Callable[[VerifiedDelegation], None] | None = None,
        public_base_url: str | None = None,
    ) -> None:
        """``public_base_url``: where callers reach this member, the origin a holder's
        proof names (``htu``); without it a holder-bound token is refused."""
        if not skills:
            raise ValueError("the authorizer needs at least one skill")
        self._verifier = verifier
        self._skills = dict(skills)
        self.decisions = decisions
        self._telemetry = decisions.telemetry  # its app's: the decisions are counted there
        self._task_binding = task_binding
        self._issuers = issuers
        self._require_digest = require_request_digest
        self._witness = witness
        self._public_base_url = public_base_url

    def __call__(self, request: Request, method: str, params: JSONObject) -> CallContext:
        try:
            with self._telemetry.step_span("verify_token", {"rpc.method": method}):
                state = request.scope.get("state") or {}
                authenticated: Authenticated | None = state.get(AUTHENTICATED_STATE)
                # authenticated from these very headers (bearer token and holder's proof)
                token = authenticated.token if authenticated is not None else bearer_token(request)
                verified, creates_task = self._verified(
                    request, token, method, params, authenticated
                )
        except DelegationDenied as denial:
            self.decisions.refused(method, denial)
            raise refusal(denial) from None
        owner = owner_of(verified.grant)
        self.decisions.record(allowed(method, verified, owner))
        grant = verified.grant
        return CallContext(
            owner=owner,
            headers=VisibleHeaders(request),
            claim_task_creation=_Claim(self, method, verified) if creates_task else None,
            lease_expires_at=grant.exp,
            budget=grant.handoff.budget,
            bound={"jti": grant.jti, "req_digest": grant.req_digest, "aud": grant.aud},
            held_token=token,
        )

    async def authenticate(self, request: Request) -> Authenticated:
        """The token of ``request`` checked from its headers alone, before any body is
        read; a refusal is recorded (its method unknown yet) and raised for the wire.

        With an :class:`~member_kit.trust.refresh.IssuerDirectory`, an expired issuer
        set is refreshed in the background, and a kid the issuer's keys lack makes one
        refresh (rate-limited) and one more try; refused still, the answer says when to
        try again (``Retry-After``, by when the issuer's set will have been fetched
        again, whoever spent this interval's refresh). It runs in a span of its own,
        ``<prefix>authenticate_token`` (``remote_risk.authenticate_token`` for
        remote_risk), with the verdict and a denial's reason (none when nobody receives
        spans: the request's span stays current)."""
        observed = self._telemetry
        with observed.step_span("authenticate_token") as span:
            try:
                token = bearer_token(request)
                authenticated = await self._authenticate(token, self._holder(request))
            except DelegationDenied as denial:
                observed.checked_before_body(span, denial.reason.value)
                self.decisions.refused(BODY_NOT_READ, denial)
                raise refusal(denial) from None
            observed.checked_before_body(span, None)
            return authenticated

    def _holder(self, request: Request) -> HolderRequest | None:
        """What a holder's proof is checked against (RFC 9449): its one ``DPoP`` header,
        the method, and the URL as this member publishes it."""
        if self._public_base_url is None:
            return None
        proofs = request.headers.getlist(PROOF_HEADER)
        if len(proofs) > 1:
            raise DelegationDenied(DenialReason.HOLDER_PROOF_INVALID, "more than one DPoP header")
        url = _request_url(self._public_base_url, request.scope["path"])
        return HolderRequest(proofs[0] if proofs else None, request.scope["method"], url)

    async def _authenticate(self, token: str | None, holder: HolderRequest | None) -> Authenticated:
        """The verifier's authenticate (which takes the holder's proof once it passes:
        a retry after a refreshed key set happens only before the proof is looked at)."""
        directory = self._issuers
        if directory is None:
            return self._verifier.authenticate(token, holder)
        directory.refresh_expired()
        version = directory.version
        try:
            return self._verifier.authenticate(token, holder)
        except DelegationDenied as denial:
            if denial.reason is not DenialReason.KID_UNKNOWN or denial.issuer is None:
                raise
            await directory.refresh(denial.issuer, unknown_kid=True)
            if directory.version == version:
                raise _come_back_later(denial, directory) from None
        try:
            return self._verifier.authenticate(token, holder)
        except DelegationDenied as denial:
            if denial.reason is DenialReason.KID_UNKNOWN and denial.issuer is not None:
                raise _come_back_later(denial, directory) from None
            raise

    def claim(self, method: str, verified: VerifiedDelegation, *, again: bool) -> None:
        """Claims the token's ``jti`` for one task; a refusal is recorded and raised.
        ``again``: see :meth:`~member_kit.trust.verifier.DelegationVerifier.claim_task_creation`."""
        try:
            with self._telemetry.step_span("claim_token"):
                self._verifier.claim_task_creation(verified, again=again)
        except DelegationDenied as denial:
            self.decisions.refused(method, denial)
            raise refusal(denial) from None

    def _verified(
        self,
        request: Request,
        token: str,
        method: str,
        params: JSONObject,
        authenticated: Authenticated | None,
    ) -> tuple[VerifiedDelegation, bool]:
        """The verified ``token`` (the request's bearer token) and whether the request may
        create a task (jti not claimed). ``authenticated``: the token as the edge
        authenticated it from this request's headers, if it did (its holder's proof too)."""
        facts = asked(method, params, self._skills)
        creates_task = facts.creates_task and facts.names_handoff
        verified = self._verifier.verify(
            token,
            skill_id=facts.skill.id,
            required_scopes=facts.skill.scopes,
            handoff_id=facts.handoff_id,
            read_only=facts.skill.read_only,
            tenant=facts.tenant,
            authenticated=authenticated,
            holder=None if authenticated is not None else self._holder(request),
        )
        if method in SENDING_METHODS:
            _check_binding(facts, verified)
            check_request_digest(params, verified, self._require_digest)
            if self._witness is not None:
                self._witness(verified)
            if facts.continues is not None and self._task_binding is not None:
                bound = self._task_binding(owner_of(verified.grant), facts.continues)
                _check_continuation(bound, verified)
        return verified, creates_task


def _come_back_later(denial: DelegationDenied, directory: IssuerDirectory) -> DelegationDenied:
    """A ``kid_unknown`` denial that says when the issuer's keys will have been fetched again."""
    assert denial.issuer is not None
    denial.retry_after = directory.retry_after(denial.issuer)
    return denial


def _check_binding(facts: Asked, verified: VerifiedDelegation) -> None:
    """A message names the handoff (and, if it says, the attempt) its token is bound to."""
    detail = ""
    if not facts.names_handoff:
        detail = "the message names no handoff (metadata.handoffId)"
    elif facts.attempt is not None and facts.attempt != verified.grant.handoff.attempt:
        detail = "metadata.attempt differs from the attempt the token is bound to"
    if detail:
        denial = DelegationDenied(DenialReason.HANDOFF_MISMATCH, detail)
        denial.jti, denial.claims_digest = verified.grant.jti, verified.claims_digest
        raise denial


def _check_continuation(bound: Mapping[str, Any] | None, verified: VerifiedDelegation) -> None:
    """The continued task was opened under the token's handoff id and attempt."""
    if bound is None:
        return
    handoff = verified.grant.handoff
    if bound.get("handoffId") != handoff.id or bound.get("attempt") != handoff.attempt:
        denial = DelegationDenied(DenialReason.CONTINUATION_MISMATCH)
        denial.jti, denial.claims_digest = verified.grant.jti, verified.claims_digest
        raise denial


def refusal(denial: DelegationDenied) -> errors.DelegationRefused:
    """The wire form of a denial; its message is the fixed text of the reason's row."""
    challenge = denial.www_authenticate() if denial.http_status in (401, 403) else None
    return errors.DelegationRefused(
        denial.http_status,
        denial.reason.value,
        f"delegation token refused: {REASONS[denial.reason].meaning}",
        challenge,
        retry_after=denial.retry_after,
    )


class VisibleHeaders(Mapping[str, str]):
    """A request's headers but its credentials, picked out only if someone reads them
    (most operations never do)."""

    def __init__(self, request: Request) -> None:
        self._request = request
        self._kept: dict[str, str] | None = None

    def _visible(self) -> dict[str, str]:
        if self._kept is None:
            headers = self._request.headers.items()
            self._kept = {k: v for k, v in headers if k.lower() not in _HIDDEN_HEADERS}
        return self._kept

    def __getitem__(self, name: str) -> str:
        return self._visible()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._visible())

    def __len__(self) -> int:
        return len(self._visible())


def delegation_authorizer(
    verifier: DelegationVerifier,
    card: AgentCard,
    *,
    decisions: DecisionLog | None = None,
    task_binding: TaskBinding | None = None,
    issuers: IssuerDirectory | None = None,
    require_request_digest: bool = False,
    witness: Callable[[VerifiedDelegation], None] | None = None,
    public_base_url: str | None = None,
) -> Authorize:
    """The ``authorize`` hook checking delegation tokens for the skills ``card`` declares;
    with ``task_binding`` a continuation is held to the binding of the task it continues;
    with ``issuers`` the keys of issuers given by URL follow their rotation; with
    ``require_request_digest`` a send under a token that binds no request is refused;
    ``witness`` keeps the issuer's tree head a send's token carries (or refuses it)."""
    log = decisions if decisions is not None else DecisionLog()
    return DelegationAuthorizer(
        verifier,
        skill_authorities(card),
        log,
        task_binding,
        issuers,
        require_request_digest,
        witness,
        public_base_url,
    )


@dataclass(frozen=True)
class _Claim:
    """The :class:`~member_kit.server.jsonrpc.TaskClaim` of one verified token."""

    authorizer: DelegationAuthorizer
    method: str
    verified: VerifiedDelegation

    def __call__(self) -> None:
        self.authorizer.claim(self.method, self.verified, again=False)

    def again(self) -> None:
        self.authorizer.claim(self.method, self.verified, again=True)
