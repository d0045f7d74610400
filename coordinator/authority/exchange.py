"""Token exchange at the run's owner (RFC 8693): a holder's child token for a third agent.

A member holding a delegation token this coordinator minted asks for a child token for
another registered agent, presenting the token (``subject_token``) and a proof that it
holds the key the token was minted for (``actor_token``, see
:mod:`coordinator.authority.holder_proof`). The child is narrowed from the parent with
the same rule as every handoff (:func:`contracts.grant.narrow`): scope within the
parent's and the target skill's, budget out of what the parent has left after all its
earlier children (exact: every hop is recorded here, under one lock), expiry within the
parent's, principal, tenant and final owner unchanged, the ``act`` chain one deeper with
the holder on top, no deeper than the limit, and no loop back to an agent already in the
chain (:mod:`contracts.chain`). The child names the key of the holder that proved the
exchange (``cnf.jkt``, RFC 9449), always: its agent serves it only with a fresh proof by
that key, so a child captured on the wire is useless. The hop is recorded in the ledger
(``delegation.exchanged``) and the grants table, and the child is minted with
:func:`mint_token` naming its parent.

Every refusal is an :class:`ExchangeRefused` with a stable reason and a 4xx status.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, insert, select, text

from agent_cards.keys import KeySet
from agent_cards.trusted import VerificationKey
from contracts import strict_json
from contracts.chain import GRANT_TYPE, JWT_TOKEN_TYPE, MAX_CHAIN_DEPTH, loops, request_binding
from contracts.grant import (
    Budget,
    DelegationRequest,
    Dimension,
    Grant,
    Handoff,
    NarrowingError,
    ParentRef,
    SkillAuthority,
    claims_digest,
    narrow,
    token_hash,
)
from contracts.wire import AgentCard
from coordinator.audit.log.events import AuditEvent
from coordinator.authority.delegator import required_scopes
from coordinator.authority.holder import bound_to_thumbprint
from coordinator.authority.holder_proof import (
    ExchangeRefused,
    ProofReplayGuard,
    Proven,
    verify_proof,
)
from coordinator.authority.hops import (
    EXCHANGE_ATTEMPT_PREFIX,
    EXCHANGED,
    check_unused,
    remaining_after_children,
)
from coordinator.authority.revocation import revoked_handoffs, status_base, with_status_entry
from coordinator.authority.subject_token import verified_own_token
from coordinator.authority.tokens import mint_token
from coordinator.ids import new_jti
from coordinator.storage.schema import grants
from coordinator.workspace import Workspace

REQUIRED = (
    *("grant_type", "subject_token", "subject_token_type", "actor_token"),
    *("actor_token_type", "audience", "skill", "budget"),
)
OPTIONAL = ("scope", "expires_in")
_SECONDS = re.compile(r"[0-9]{1,9}")
# The class half of PostgreSQL's two-key advisory lock an exchange takes on its parent.
_EXCHANGE_LOCK_CLASS = 0x43484E53
_PARENT_LOCK = text("SELECT pg_advisory_xact_lock(:cls, hashtext(:key))")
REFUSED = "delegation.exchange_refused"

# What a widening in each dimension is refused as.
WIDENING_REASONS = {
    Dimension.SCOPE: "scope_widened",
    Dimension.EXPIRY: "expiry_widened",
    Dimension.NOT_BEFORE: "expiry_widened",
    Dimension.ISSUED_AT: "expiry_widened",
    Dimension.SUBJECT: "principal_changed",
    Dimension.TENANT: "tenant_changed",
    Dimension.FINAL_OWNER: "final_owner_changed",
    Dimension.ACTOR: "chain_too_deep",
    Dimension.AUDIENCE: "audience_widened",
}


@dataclass(frozen=True)
class Target:
    """A registered agent as the exchange sees it: its name, its identity (a token's
    ``aud``; None if unknown), its card and where it is reached."""

    name: str
    identity: str | None
    card: AgentCard
    endpoint: str
    binding: str


# The registered agent of a name (None: no such agent), and every key pinned for one.
Targets = Callable[[str], Target | None]
PinnedKeys = Callable[[], list[VerificationKey]]


@dataclass(frozen=True)
class Exchanged:
    """A child token, what may be shown of it, and where its audience is reached."""

    token: str
    grant: Grant
    agent: Target

    def answer(self, now: int) -> dict[str, Any]:
        """The RFC 8693 response, with where to send (``endpoint``, ``binding``) and the
        handoff the message must name."""
        return {
            "access_token": self.token,
            "issued_token_type": JWT_TOKEN_TYPE,
            "token_type": "N_A",
            "expires_in": max(self.grant.exp - now, 0),
            "scope": self.grant.scope,
            "endpoint": self.agent.endpoint,
            "binding": self.agent.binding,
            "handoff_id": self.grant.handoff.id,
            "attempt": self.grant.handoff.attempt,
        }


class TokenExchange:
    """The owner's side of the exchange, for one coordinator's workspace and keys."""

    def __init__(
        self,
        ws: Workspace,
        keys: KeySet | Callable[[], KeySet],
        issuer: str,
        targets: Targets,
        pinned_keys: PinnedKeys,
        max_depth: int = MAX_CHAIN_DEPTH,
    ) -> None:
        self.ws = ws
        self.targets = targets
        self.pinned_keys = pinned_keys
        # the owner's keys as they are at each exchange (a rotation takes effect at once)
        self._keys = keys if callable(keys) else (lambda: keys)
        self.issuer = issuer
        self.max_depth = max_depth
        self.replay = ProofReplayGuard()
        self._lock = threading.Lock()  # one hop at a time: budgets carved exactly

    def exchange(self, parameters: Mapping[str, str]) -> Exchanged:
        now = int(time.time())
        _check_parameters(parameters)
        parent = self._parent(parameters["subject_token"], now)
        run_id = self._run_of(parent)
        # Until the proof verified the asker is a stranger (a captured token proves
        # nothing): its refusals are in the access log, never in the ledger it could grow.
        proven = verify_proof(
            parameters["actor_token"],
            holder=parent.aud,
            issuer=self.issuer,
            binding=request_binding(parameters),
            keys=self.pinned_keys(),
            replay=self.replay,
            now=now,
        )
        with self.ws.engine().connect() as connection:  # any process of this owner's
            check_unused(connection, run_id, proven.jti)
        try:
            if parent.handoff.id in revoked_handoffs(self.ws, run_id):
                raise ExchangeRefused(401, "token_revoked", "the parent's grant was revoked")
            return self._mint(parameters, parent, run_id, now, proven)
        except ExchangeRefused as refused:  # the holder asked: the run's ledger keeps it
            self._record(REFUSED, run_id, {"parent_jti": parent.jti, "reason": refused.reason})
            raise

    def _mint(
        self,
        parameters: Mapping[str, str],
        parent: Grant,
        run_id: str,
        now: int,
        proven: Proven,
    ) -> Exchanged:
        agent, skill = _target(self.targets, parameters["audience"], parameters["skill"])
        audience = agent.identity or ""
        if parent.act_depth + 1 > self.max_depth:
            raise ExchangeRefused(403, "chain_too_deep", f"at most {self.max_depth} hops")
        if loops(audience, parent.act, self.issuer) or audience == parent.aud:
            raise ExchangeRefused(403, "chain_loop", "the chain would return to an agent in it")
        with self._lock:  # one hop at a time here; the write re-checks across processes
            with self.ws.engine().connect() as connection:
                remaining = remaining_after_children(connection, parent, run_id)
            child = _narrowed(parent, parameters, audience, skill, remaining, now, self)
            # bound to the holder that proved the exchange: a bearer child could be
            # replayed by anyone who saw it on the wire between the holder and its agent
            child = bound_to_thumbprint(child, proven.jkt)
            child = with_status_entry(child, status_base(), run_id, attempt=1)
            token = mint_token(child, self._keys().signing_key())
            self.record_hop(run_id, parent, child, _hop(parent, child, agent, proven.jti))
        return Exchanged(token, child, agent)

    def _parent(self, token: str, now: int) -> Grant:
        """The subject token's claims, if this owner signed it and it is live."""
        return verified_own_token(token, self._keys(), self.issuer, now)

    def _run_of(self, parent: Grant) -> str:
        with self.ws.engine().connect() as connection:
            row = connection.execute(
                select(grants.c.run_id).where(grants.c.jti == parent.jti)
            ).first()
        if row is None:
            raise ExchangeRefused(403, "parent_unknown", "no grant of this owner has this jti")
        return str(row[0])

    def _record(self, event_type: str, run_id: str, data: Mapping[str, Any]) -> None:
        trail = self.ws.trail()
        trail.emit(event_type, run_id=run_id, data=data)
        trail.flush()

    def record_hop(self, run_id: str, parent: Grant, child: Grant, hop: Mapping[str, Any]) -> None:
        """The hop in the ledger and the child in the grants, in one transaction that
        first checks again, under a lock on the parent, that the child still fits what
        the parent has left: another coordinator process on the same database may have
        exchanged from the same parent meanwhile (``budget_exceeded``), or granted a hop
        on the same proof (``proof_replayed``); then nothing is written."""

        def fits_then_grant(connection: Connection) -> None:
            if connection.dialect.name == "postgresql":
                connection.execute(_PARENT_LOCK, {"cls": _EXCHANGE_LOCK_CLASS, "key": parent.jti})
            check_unused(connection, run_id, hop["proof_jti"])
            left = remaining_after_children(connection, parent, run_id)
            exceeded = child.handoff.budget.exceeds(left)
            if exceeded is not None:
                raise ExchangeRefused(403, "budget_exceeded", f"{exceeded.value}: spent meanwhile")
            connection.execute(insert(grants).values(**_grant_row(child, run_id)))

        event = AuditEvent(
            event_type=EXCHANGED,
            actor="coordinator",
            data=dict(hop),
            run_id=run_id,
        )
        self.ws.ledger().append_many_with([event], fits_then_grant)


def _check_parameters(parameters: Mapping[str, str]) -> None:
    missing = [name for name in REQUIRED if not parameters.get(name)]
    unknown = sorted(set(parameters) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        named = ", ".join(missing or unknown)
        raise ExchangeRefused(400, "exchange_request_invalid", f"missing or unknown: {named}")
    if parameters["grant_type"] != GRANT_TYPE:
        raise ExchangeRefused(400, "unsupported_grant_type", f"grant_type must be {GRANT_TYPE}")
    for name in ("subject_token_type", "actor_token_type"):
        if parameters[name] != JWT_TOKEN_TYPE:
            raise ExchangeRefused(400, "exchange_request_invalid", f"{name} must be JWT")


def _target(targets: Targets, name: str, skill_id: str) -> tuple[Target, SkillAuthority]:
    agent = targets(name)
    if agent is None:
        raise ExchangeRefused(404, "unknown_target", f"no agent {name!r} is registered")
    scopes = required_scopes(agent.card, skill_id)
    if agent.identity is None or scopes is None or agent.card.skill(skill_id) is None:
        raise ExchangeRefused(
            404, "unknown_target", f"{name!r} has no skill {skill_id!r} taking delegation tokens"
        )
    return agent, SkillAuthority(id=skill_id, scopes=scopes, read_only=True)


def _narrowed(
    parent: Grant,
    parameters: Mapping[str, str],
    audience: str,
    skill: SkillAuthority,
    remaining: Budget,
    now: int,
    owner: TokenExchange,
) -> Grant:
    budget = _budget(parameters["budget"])
    scope = parameters.get("scope") or " ".join(sorted(skill.scopes))
    expires_at = parent.exp
    if "expires_in" in parameters:
        if not _SECONDS.fullmatch(parameters["expires_in"]):
            raise ExchangeRefused(400, "exchange_request_invalid", "expires_in is seconds")
        expires_at = now + int(parameters["expires_in"])
    hop = f"hop-{uuid.uuid4().hex[:16]}"
    try:
        request = DelegationRequest(
            issuer=owner.issuer,
            audience=audience,
            skill=skill,
            scope=scope,
            handoff=Handoff(
                id=hop,
                attempt=1,
                duplicate_key=hop,
                state_ref=parent.handoff.state_ref,
                final_owner=parent.handoff.final_owner,
                budget=budget,
            ),
            jti=new_jti(),
            issued_at=max(now, parent.iat),
            expires_at=expires_at,
            actor=parent.aud,
        )
        child = narrow(parent, request, remaining=remaining, max_act_depth=owner.max_depth)
    except ValidationError:
        raise ExchangeRefused(400, "exchange_request_invalid", "scope is not a scope") from None
    except NarrowingError as exc:
        reason = WIDENING_REASONS.get(exc.dimension, "budget_exceeded")
        raise ExchangeRefused(403, reason, str(exc)) from None
    return Grant.model_validate({**child.claims(), "parent": _parent_ref(parameters, parent)})


def _parent_ref(parameters: Mapping[str, str], parent: Grant) -> dict[str, str]:
    return ParentRef(jti=parent.jti, hash=token_hash(parameters["subject_token"])).model_dump()


def _budget(text: str) -> Budget:
    try:
        return Budget.model_validate(strict_json.loads(text))
    except (ValueError, ValidationError):
        raise ExchangeRefused(
            400, "exchange_request_invalid", "budget must be a JSON object of counts"
        ) from None


def _hop(parent: Grant, child: Grant, agent: Target, proof_jti: str) -> dict[str, Any]:
    """What the ledger keeps of one hop: never a token."""
    assert child.parent is not None
    return {
        "parent_jti": parent.jti,
        "parent_handoff_id": parent.handoff.id,
        "parent_claims_digest": claims_digest(parent),
        "parent_hash": child.parent.hash,
        "holder": parent.aud,
        "to": agent.name,
        "aud": child.aud,
        "jti": child.jti,
        "claims_digest": claims_digest(child),
        "handoff_id": child.handoff.id,
        "scope": child.scope,
        "exp": child.exp,
        "depth": child.act_depth,
        "budget": child.handoff.budget.model_dump(),
        "proof_jti": proof_jti,
        "cnf_jkt": child.cnf.jkt if child.cnf is not None else None,
    }


def _grant_row(child: Grant, run_id: str) -> dict[str, Any]:
    return {
        "jti": child.jti,
        "run_id": run_id,
        "attempt_id": EXCHANGE_ATTEMPT_PREFIX + child.handoff.id,
        "claims_digest": claims_digest(child),
        "scope": child.scope,
        "aud": child.aud,
        "exp": child.exp,
    }
