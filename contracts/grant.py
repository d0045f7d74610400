"""Delegation grants: the claims a delegation token carries, and the rule that they only narrow.

A :class:`Grant` is the authority one party holds for one slice of a run. When the
coordinator hands a slice to a specialist it derives a child grant with :func:`narrow`.
The child keeps the principal (``sub``) and ``tenant``, names exactly one audience, holds a
subset of the parent's scope and of what the target skill declares, ends no later than
the parent, reserves no more budget than the parent has left (model requests and tokens
included: a child cannot spend more of the federation's model budget than the run has
left), has no effect budget for a read-only skill, and records one more actor hop
(RFC 8693 ``act``), up to a depth limit.
Any widening raises :class:`NarrowingError` naming the dimension.

:func:`widened_dimension` is the same rule as a predicate over a finished pair, and it
reads the child as raw claims too: a claim the child lacks counts as wider than the
parent, never as "no restriction".

Everything here is pure: no clock, no keys, no I/O.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, StrictInt, StrictStr, TypeAdapter, ValidationError

from contracts.canonical import canonical_json
from contracts.model import Model

DEFAULT_MAX_ACT_DEPTH = 4

# Identifiers are plain ASCII and compared byte for byte; nothing is normalised.
IDENTIFIER_PATTERN = r"^[A-Za-z0-9._:@/+#=~-]{1,256}$"
# RFC 6749 section 3.3: scope tokens are printable ASCII except space, quote and backslash.
SCOPE_TOKEN_PATTERN = r"^[\x21\x23-\x5B\x5D-\x7E]+$"
SCOPE_PATTERN = r"^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$"

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
# An agent's identity (a token's ``aud``): this, then its key's RFC 7638 thumbprint
# (RFC 9278; agent_cards.identity computes it from the key).
THUMBPRINT_URI_PREFIX = "urn:ietf:params:oauth:jwk-thumbprint:sha-256:"

Identifier = Annotated[StrictStr, Field(pattern=IDENTIFIER_PATTERN)]
NumericDate = Annotated[StrictInt, Field(ge=0)]
Count = Annotated[StrictInt, Field(ge=0)]
ScopeString = Annotated[StrictStr, Field(pattern=SCOPE_PATTERN, max_length=2048)]
RequestDigest = Annotated[StrictStr, Field(pattern=r"^sha-256:[A-Za-z0-9_-]{43}$")]
CompactJWS = Annotated[
    StrictStr, Field(pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$", max_length=2048)
]


class Dimension(StrEnum):
    """Each way in which a child grant could be wider than its parent."""

    SUBJECT = "sub"
    TENANT = "tenant"
    AUDIENCE = "aud"
    SCOPE = "scope"
    EXPIRY = "exp"
    NOT_BEFORE = "nbf"
    ISSUED_AT = "iat"
    ACTOR = "act"
    FINAL_OWNER = "handoff.final_owner"
    ACTIONS = "budget.actions"
    CONTEXT_UNITS = "budget.context_units"
    EFFECTS = "budget.effects"
    MODEL_REQUESTS = "budget.model_requests"
    MODEL_TOKENS = "budget.model_tokens"


class NarrowingError(ValueError):
    """A requested child grant that would be wider than its parent in ``dimension``."""

    def __init__(self, dimension: Dimension, message: str) -> None:
        super().__init__(f"{dimension.value}: {message}")
        self.dimension = dimension


class _Claims(Model):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class Actor(_Claims):
    """RFC 8693 ``act``: the current actor, with earlier actors nested inside."""

    sub: Identifier
    iss: Identifier | None = None
    act: Actor | None = None

    @property
    def depth(self) -> int:
        return act_depth(self)


class StateRef(_Claims):
    id: Identifier
    version: Count


class Budget(_Claims):
    """What a holder may spend: actions, context units, effects (side effects), and model
    requests and tokens across the federation.

    ``model_requests`` and ``model_tokens`` are optional: absent means the holder's
    authority names no such limit. Once a parent names one, a child without it is wider
    (unlimited), never "no restriction".
    """

    actions: Count
    context_units: Count
    effects: Count
    model_requests: Count | None = None
    model_tokens: Count | None = None

    def exceeds(self, limit: Budget) -> Dimension | None:
        """The first budget dimension in which ``self`` is larger than ``limit``, if any."""
        for dimension, mine, theirs in (
            (Dimension.ACTIONS, self.actions, limit.actions),
            (Dimension.CONTEXT_UNITS, self.context_units, limit.context_units),
            (Dimension.EFFECTS, self.effects, limit.effects),
        ):
            if mine > theirs:
                return dimension
        for dimension, wanted, held in (
            (Dimension.MODEL_REQUESTS, self.model_requests, limit.model_requests),
            (Dimension.MODEL_TOKENS, self.model_tokens, limit.model_tokens),
        ):
            if held is not None and (wanted is None or wanted > held):
                return dimension
        return None


class ParentRef(_Claims):
    """The grant a chained child was exchanged from: its ``jti`` and ``hash``, the
    byte-commitment ``"sha-256:" + base64url(SHA-256(the parent's compact JWS))`` (see
    :func:`token_hash`), so a verifier holding the parent token checks the link offline."""

    jti: Identifier
    hash: RequestDigest


class Handoff(_Claims):
    """The slice a grant is bound to: which handoff, which attempt, which state, which budget."""

    id: Identifier
    attempt: Annotated[StrictInt, Field(ge=1)]
    duplicate_key: Identifier
    state_ref: StateRef
    final_owner: Identifier
    budget: Budget


class StatusListRef(_Claims):
    """IETF OAuth Token Status List: the token's index in the list at ``uri``."""

    idx: Annotated[StrictInt, Field(ge=0)]
    uri: Annotated[StrictStr, Field(pattern=r"^https?://[^\s]{1,2040}$")]


class Confirmation(_Claims):
    """RFC 7800 ``cnf`` with RFC 9449's ``jkt``: the RFC 7638 thumbprint of the key of
    the one party allowed to present the token (with a proof by that key)."""

    jkt: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_-]{43}$")]


class TokenStatus(_Claims):
    status_list: StatusListRef


class Grant(_Claims):
    """The claims of a delegation token (see ``docs/delegation-token.md``)."""

    iss: Identifier
    sub: Identifier
    aud: Identifier
    iat: NumericDate
    nbf: NumericDate
    exp: NumericDate
    jti: Identifier
    scope: ScopeString
    tenant: Identifier
    handoff: Handoff
    act: Actor | None = None
    # What was asked (contracts/request_digest.py), bound by the minting party.
    req_digest: RequestDigest | None = None
    # The minting party's latest signed tree head of its audit log (a compact JWS).
    log_head: CompactJWS | None = None
    # A child minted by token exchange names the token it was exchanged from.
    parent: ParentRef | None = None
    # Where the token's revocation status is published (draft-ietf-oauth-status-list).
    status: TokenStatus | None = None
    # The holder's key (RFC 9449): without a fresh proof by it the token is refused.
    cnf: Confirmation | None = None

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(self.scope.split(" "))

    @property
    def act_depth(self) -> int:
        return act_depth(self.act)

    def claims(self) -> dict[str, Any]:
        """The JSON claims, unset optional members omitted."""
        return self.model_dump(mode="json", exclude_none=True)


class SkillAuthority(_Claims):
    """What the target skill declares: the scopes it accepts and whether it only reads."""

    id: Identifier
    scopes: frozenset[Annotated[StrictStr, Field(pattern=SCOPE_TOKEN_PATTERN)]]
    read_only: bool


class DelegationRequest(_Claims):
    """What the delegating party asks for; :func:`narrow` turns it into a child grant.

    ``sub`` and ``tenant`` default to the parent's; giving a different value is refused,
    never honoured. ``actor`` is the party that will act on the child grant and defaults
    to the audience.
    """

    issuer: Identifier
    audience: Identifier
    skill: SkillAuthority
    scope: ScopeString
    handoff: Handoff
    jti: Identifier
    issued_at: NumericDate
    expires_at: NumericDate
    not_before: NumericDate | None = None
    actor: Identifier | None = None
    sub: Identifier | None = None
    tenant: Identifier | None = None


def act_depth(act: Actor | Mapping[str, Any] | None) -> int:
    """How many actors a chain holds; counted without recursion."""
    depth = 0
    current: Any = act
    while current is not None:
        depth += 1
        current = current.act if isinstance(current, Actor) else current.get("act")
        if current is not None and not isinstance(current, Actor | Mapping):
            raise TypeError("act must be a JSON object")
    return depth


def narrow(
    parent: Grant,
    request: DelegationRequest,
    *,
    remaining: Budget | None = None,
    max_act_depth: int = DEFAULT_MAX_ACT_DEPTH,
) -> Grant:
    """The child grant for ``request``, or :class:`NarrowingError` naming what would widen.

    ``remaining`` is what is left of the parent's budget after earlier reservations; it
    defaults to the parent's whole budget and may never exceed it.
    """
    left = _remaining(parent, remaining)
    _require_equal(Dimension.SUBJECT, request.sub, parent.sub)
    _require_equal(Dimension.TENANT, request.tenant, parent.tenant)
    _require_equal(Dimension.FINAL_OWNER, request.handoff.final_owner, parent.handoff.final_owner)
    _check_scope(request.scope, parent.scopes, request.skill)
    _check_times(parent, request)
    _check_budget(request.handoff.budget, left, request.skill)
    if parent.act_depth + 1 > max_act_depth:
        raise NarrowingError(
            Dimension.ACTOR, f"a further hop would exceed the act depth limit {max_act_depth}"
        )
    return Grant(
        iss=request.issuer,
        sub=parent.sub,
        aud=request.audience,
        iat=request.issued_at,
        nbf=request.not_before if request.not_before is not None else request.issued_at,
        exp=request.expires_at,
        jti=request.jti,
        scope=request.scope,
        tenant=parent.tenant,
        handoff=request.handoff,
        act=Actor(sub=request.actor or request.audience, act=parent.act),
    )


def _remaining(parent: Grant, remaining: Budget | None) -> Budget:
    if remaining is None:
        return parent.handoff.budget
    exceeded = remaining.exceeds(parent.handoff.budget)
    if exceeded is not None:
        raise NarrowingError(exceeded, "the remaining budget is larger than the parent's")
    return remaining


def _require_equal(dimension: Dimension, requested: str | None, parent: str) -> None:
    if requested is not None and requested != parent:
        raise NarrowingError(dimension, f"must stay {parent!r}, not {requested!r}")


def _check_scope(scope: str, parent_scopes: frozenset[str], skill: SkillAuthority) -> None:
    requested = frozenset(scope.split(" "))
    beyond_parent = sorted(requested - parent_scopes)
    if beyond_parent:
        raise NarrowingError(Dimension.SCOPE, f"not held by the parent: {' '.join(beyond_parent)}")
    beyond_skill = sorted(requested - skill.scopes)
    if beyond_skill:
        raise NarrowingError(
            Dimension.SCOPE, f"not declared by skill {skill.id}: {' '.join(beyond_skill)}"
        )


def _check_times(parent: Grant, request: DelegationRequest) -> None:
    not_before = request.not_before if request.not_before is not None else request.issued_at
    if request.issued_at < parent.iat:
        raise NarrowingError(Dimension.ISSUED_AT, "the child cannot be issued before its parent")
    if request.issued_at >= parent.exp:
        raise NarrowingError(Dimension.EXPIRY, "the parent had expired when the child was issued")
    if not_before < parent.nbf:
        raise NarrowingError(Dimension.NOT_BEFORE, "the child cannot start before its parent")
    if request.expires_at > parent.exp:
        raise NarrowingError(Dimension.EXPIRY, "the child cannot outlive its parent")
    if request.expires_at <= not_before or request.expires_at <= request.issued_at:
        raise NarrowingError(Dimension.EXPIRY, "the child must expire after it starts")


def _check_budget(budget: Budget, left: Budget, skill: SkillAuthority) -> None:
    exceeded = budget.exceeds(left)
    if exceeded is not None:
        raise NarrowingError(exceeded, "more than the parent has left")
    if skill.read_only and budget.effects != 0:
        raise NarrowingError(Dimension.EFFECTS, f"skill {skill.id} is read-only")


# --- the predicate ---------------------------------------------------------------------------


def widened_dimension(child: Grant | Mapping[str, Any], parent: Grant) -> Dimension | None:
    """The first dimension in which ``child`` is wider than ``parent``; ``None`` if it is not.

    ``child`` may be raw claims: a missing or malformed claim counts as wider in its
    dimension. Equal grants are narrower-or-equal. The audience may differ (each grant
    names its own single audience) but must be one identifier.
    """
    claims = child.claims() if isinstance(child, Grant) else child
    checks = (
        (Dimension.SUBJECT, lambda: claims["sub"] == parent.sub),
        (Dimension.TENANT, lambda: claims["tenant"] == parent.tenant),
        (Dimension.AUDIENCE, lambda: _is_identifier(claims["aud"])),
        (Dimension.SCOPE, lambda: _scopes_within(claims["scope"], parent.scopes)),
        (Dimension.ISSUED_AT, lambda: _int(claims["iat"]) >= parent.iat),
        (Dimension.NOT_BEFORE, lambda: _int(claims["nbf"]) >= parent.nbf),
        (Dimension.EXPIRY, lambda: _int(claims["exp"]) <= parent.exp),
        (Dimension.ACTOR, lambda: _extends_chain(claims.get("act"), parent.act)),
        (
            Dimension.FINAL_OWNER,
            lambda: claims["handoff"]["final_owner"] == parent.handoff.final_owner,
        ),
    )
    for dimension, holds in checks:
        if not _safely(holds):
            return dimension
    return _budget_widening(claims, parent.handoff.budget)


def is_narrower_or_equal(child: Grant | Mapping[str, Any], parent: Grant) -> bool:
    """Whether ``child`` is at most as powerful as ``parent`` in every dimension."""
    return widened_dimension(child, parent) is None


def _safely(check: Any) -> bool:
    try:
        return bool(check())
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("a NumericDate here is an integer")
    return value


def _is_identifier(value: Any) -> bool:
    return isinstance(value, str) and _IDENTIFIER.fullmatch(value) is not None


def _scopes_within(scope: Any, parent_scopes: frozenset[str]) -> bool:
    if not isinstance(scope, str) or not scope:
        return False
    return frozenset(scope.split(" ")) <= parent_scopes


def _extends_chain(child_act: Any, parent_act: Actor | None) -> bool:
    """The child's chain is the parent's chain with zero or more newer actors on top."""
    target = parent_act.model_dump(mode="json", exclude_none=True) if parent_act else None
    current = child_act
    while True:
        if current == target:
            return True
        if not isinstance(current, Mapping):
            return False
        current = current.get("act")


def _budget_widening(claims: Mapping[str, Any], limit: Budget) -> Dimension | None:
    try:
        budget = Budget.model_validate(claims["handoff"]["budget"])
    except (KeyError, TypeError):
        return Dimension.ACTIONS
    except ValidationError as exc:
        return _malformed_dimension(exc)
    return budget.exceeds(limit)


def _malformed_dimension(exc: ValidationError) -> Dimension:
    """The budget dimension a malformed budget claim names first (``actions`` if none)."""
    for error in exc.errors():
        location = error.get("loc") or ()
        if location:
            try:
                return Dimension(f"budget.{location[0]}")
            except ValueError:
                continue
    return Dimension.ACTIONS


def with_bindings(grant: Grant, req_digest: str | None, log_head: str | None) -> Grant:
    """``grant`` bound to the request whose digest is ``req_digest`` and carrying the
    minting party's latest signed tree head ``log_head``, each when given."""
    given = {"req_digest": req_digest, "log_head": log_head}
    return _with_members(grant, {name: value for name, value in given.items() if value is not None})


def token_hash(token: str) -> str:
    """``"sha-256:" + base64url(SHA-256(token))`` over the compact JWS's ASCII bytes, no
    padding: what a child's ``parent.hash`` commits to (and a holder proof binds)."""
    digest = hashlib.sha256(token.encode("ascii")).digest()
    return "sha-256:" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def with_status(grant: Grant, uri: str, idx: int) -> Grant:
    """``grant`` naming its entry ``idx`` in the status list at ``uri``."""
    return _with_members(grant, {"status": {"status_list": {"idx": idx, "uri": uri}}})


def _with_members(grant: Grant, added: Mapping[str, Any]) -> Grant:
    """``grant`` with the members ``added``, each validated as the grant's own field
    validates it (a member's value alone: the rest of the grant is valid already, and
    no rule of a grant ties two members together)."""
    if not added:
        return grant
    checked = {name: _member(name).validate_python(value) for name, value in added.items()}
    return grant.model_copy(update=checked)


@functools.cache
def _member(name: str) -> TypeAdapter[Any]:
    """The validator of the grant's member ``name``, under the grant's own config."""
    own = Grant.model_config
    config = ConfigDict(strict=own["strict"], allow_inf_nan=own["allow_inf_nan"])
    return TypeAdapter(Grant.model_fields[name].rebuild_annotation(), config=config)


def claims_digest(claims: Grant | Mapping[str, Any]) -> str:
    """``sha256:<hex>`` over the JCS form of ``claims``, for audit records in place of tokens."""
    value = claims.claims() if isinstance(claims, Grant) else dict(claims)
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()
