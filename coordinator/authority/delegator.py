"""The authority a run holds, and the narrowed grants it mints for each handoff.

A run starts from a root grant that the operator configures: the principal the work is
for, the tenant, the scopes, how long, and a budget. Where the operator names no
principal, the run's own is derived from its id (:func:`run_principal`): no two runs
share one, so a remote that scopes its tasks by principal keeps each run's apart.
Every handoff gets a child grant minted from it with :func:`contracts.grant.narrow`, so
a child can never be wider than the run in any dimension, and the budget each child
reserves is taken from what the run has left (a nested envelope, never a fresh copy).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_cards.keys import KeySet
from contracts.grant import (
    Budget,
    DelegationRequest,
    Grant,
    Handoff,
    NarrowingError,
    SkillAuthority,
    StateRef,
    claims_digest,
    narrow,
    with_bindings,
)
from contracts.handoff import HandoffBudget, HandoffRecord
from contracts.request_digest import request_digest
from contracts.wire import AgentCard
from coordinator.authority.holder import bound_to, hold
from coordinator.authority.revocation import status_base, with_status_entry
from coordinator.authority.tokens import mint_token
from coordinator.errors import GrantRefused
from coordinator.ids import new_jti, new_run_id

DEFAULT_ISSUER = "urn:a2a-federation:coordinator"
# The model requests a run may make across the federation (its own roles and every remote's).
DEFAULT_MODEL_REQUESTS = 8
DELEGATION_SCHEME_FORMAT = "JWT"


@dataclass(frozen=True)
class RunAuthority:
    """What the operator lets this run do on the principal's behalf; ``principal`` None:
    the run's own, derived from its id (:meth:`for_run`)."""

    principal: str | None = None
    tenant: str = "default"
    scopes: frozenset[str] = frozenset({"risk:interpret"})
    resources: frozenset[str] = frozenset({"pilot-records"})
    lifetime_seconds: int = 600
    max_context_units: int = 64_000
    budget: Budget = field(
        default_factory=lambda: Budget(
            actions=8, context_units=256_000, effects=0, model_requests=DEFAULT_MODEL_REQUESTS
        )
    )

    def for_run(self, run_id: str) -> RunAuthority:
        """This authority with its principal: the one given, else the run's own."""
        if self.principal is not None:
            return self
        return dataclasses.replace(self, principal=run_principal(run_id))


def run_principal(run_id: str) -> str:
    """The principal of a run the operator named none for: its own, never shared."""
    return f"run:{run_id}"


def authority_document(authority: RunAuthority) -> dict[str, object]:
    return {
        "principal": authority.principal,
        "tenant": authority.tenant,
        "scope": sorted(authority.scopes),
        "resources": sorted(authority.resources),
        "lifetime_seconds": authority.lifetime_seconds,
        "max_context_units": authority.max_context_units,
        "budget": authority.budget.model_dump(),
    }


def authority_from(document: dict[str, Any]) -> RunAuthority:
    return RunAuthority(
        principal=document["principal"],
        tenant=document["tenant"],
        scopes=frozenset(document["scope"]),
        resources=frozenset(document["resources"]),
        lifetime_seconds=int(document["lifetime_seconds"]),
        max_context_units=int(document["max_context_units"]),
        budget=_stored_budget(document["budget"]),
    )


def _stored_budget(stored: dict[str, Any]) -> Budget:
    """A stored run's budget; one stored before runs named a model limit gets the default
    one (narrower than none, never wider), so its grants still bound the remote's models."""
    return Budget.model_validate({"model_requests": DEFAULT_MODEL_REQUESTS, **stored})


@dataclass(frozen=True)
class MintedGrant:
    token: str
    grant: Grant
    # ``grant.claims()`` as signed into ``token``, when the minter made them (the digest
    # is taken over the same dict rather than a second dump of the frozen grant)
    claims: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def digest(self) -> str:
        """The claims digest, made once: the grant is frozen, and a handoff records the
        digest in the ledger's grant of it, its grant row and its credentials' summary."""
        return claims_digest(self.grant if self.claims is None else self.claims)

    def summary(self) -> dict[str, object]:
        """What may be shown and stored about a grant: never the token itself."""
        return {
            "jti": self.grant.jti,
            "scope": self.grant.scope,
            "exp": self.grant.exp,
            "aud": self.grant.aud,
            "claims_digest": self.digest,
            **({"req_digest": self.grant.req_digest} if self.grant.req_digest else {}),
            **({"cnf_jkt": self.grant.cnf.jkt} if self.grant.cnf else {}),
        }


def envelope_of(budget: HandoffBudget) -> Budget:
    """A handoff's budget as a grant's budget claim (model figures kept, absent ones absent)."""
    return Budget(
        actions=budget.actions,
        context_units=budget.context_units,
        effects=budget.effects,
        model_requests=budget.model_requests,
        model_tokens=budget.model_tokens,
    )


def required_scopes(card: AgentCard, skill_id: str) -> frozenset[str] | None:
    """The scopes the card asks for the skill under a bearer-JWT scheme, or None if it
    declares no such scheme (then the target does not take delegation tokens)."""
    schemes = card.security_schemes or {}
    bearer = {
        name
        for name, scheme in schemes.items()
        if scheme.http_auth_security_scheme is not None
        and scheme.http_auth_security_scheme.scheme.lower() == "bearer"
    }
    if not bearer:
        return None
    skill = card.skill(skill_id)
    requirements = (skill.security_requirements if skill else None) or []
    scopes: set[str] = set()
    for requirement in requirements:
        for name, listed in requirement.schemes.items():
            if name in bearer:
                scopes.update(listed.list)
    return frozenset(scopes)


class Delegator:
    """Mints one narrowed, handoff-bound token per dispatch from the run's root grant."""

    def __init__(
        self,
        keys: KeySet,
        authority: RunAuthority | None = None,
        issuer: str = DEFAULT_ISSUER,
        run_id: str | None = None,
        expires_at: int | None = None,
        final_owner: str = "coordinator",
    ) -> None:
        self.keys = keys
        self.issuer = issuer
        run_id = run_id or new_run_id()
        self.authority = (authority or RunAuthority()).for_run(run_id)
        self.final_owner = final_owner
        self.root = self._root_grant(run_id, expires_at)
        # where each token's revocation status is published (None: tokens name none)
        self.status_base = status_base()

    def _root_grant(self, run_id: str, expires_at: int | None) -> Grant:
        now = int(time.time())
        assert self.authority.principal is not None  # for_run gave it one
        return Grant(
            iss=self.issuer,
            sub=self.authority.principal,
            aud=self.issuer,
            iat=now,
            nbf=now,
            exp=expires_at or now + self.authority.lifetime_seconds,
            jti=f"root-{run_id}",
            scope=" ".join(sorted(self.authority.scopes)),
            tenant=self.authority.tenant,
            handoff=Handoff(
                id=run_id,
                attempt=1,
                duplicate_key=run_id,
                state_ref=StateRef(id=run_id, version=0),
                final_owner=self.final_owner,
                budget=self.authority.budget,
            ),
        )

    def mint(
        self,
        record: HandoffRecord,
        audience: str,
        scopes: frozenset[str],
        *,
        remaining: Budget,
        message: Mapping[str, Any] | None = None,
        log_head: str | None = None,
        holder_bound: bool = False,
    ) -> MintedGrant:
        """The token for one admitted handoff attempt; ``remaining`` is what the run had
        left before this attempt reserved its envelope. ``message`` (the message to be
        sent, wire JSON) is bound by its digest; ``log_head`` is the latest signed tree
        head of the coordinator's ledger, shown to the remote. ``holder_bound``: the token
        names this coordinator's key as its holder (``cnf.jkt``), and every request
        presenting it carries a proof by that key (:mod:`coordinator.authority.holder`)."""
        if record.budget is None or record.lease_expires_at is None or record.duplicate_key is None:
            raise GrantRefused("handoff", "the handoff is not bounded")
        now = int(time.time())
        state = record.state_ref
        request = DelegationRequest(
            issuer=self.issuer,
            audience=audience,
            skill=SkillAuthority(id=record.skill, scopes=scopes, read_only=True),
            scope=" ".join(sorted(scopes)),
            handoff=Handoff(
                id=record.handoff_id,
                attempt=record.attempt,
                duplicate_key=record.duplicate_key,
                state_ref=StateRef(
                    id=state.id if state else record.run_id, version=state.version if state else 0
                ),
                final_owner=record.final_owner,
                budget=envelope_of(record.budget),
            ),
            jti=new_jti(),
            issued_at=now,
            expires_at=min(self.root.exp, int(record.lease_expires_at.timestamp()) + 5),
            actor=self.issuer,
        )
        try:
            child = narrow(self.root, request, remaining=remaining)
        except NarrowingError as exc:
            raise GrantRefused(exc.dimension.value, str(exc)) from None
        child = _bound(child, message, log_head)
        child = with_status_entry(child, self.status_base, record.run_id, record.attempt)
        key = self.keys.signing_key()
        if holder_bound:
            child = bound_to(child, key)
        claims = child.claims()  # dumped once: the token and its digest
        token = mint_token(child, key, claims)
        if holder_bound:
            hold(token, key, child.exp)
        return MintedGrant(token=token, grant=child, claims=claims)


def _bound(child: Grant, request: Mapping[str, Any] | None, log_head: str | None) -> Grant:
    """The child grant bound to what it asks (its request digest) and carrying the
    ledger's latest signed tree head."""
    digest = request_digest(request) if request is not None else None
    return with_bindings(child, digest, log_head)
