"""Admission: the predicates a handoff must pass before anything is sent.

Pure rules, no I/O. Each failing predicate raises :class:`AdmissionDenied` naming it, and
nothing is dispatched. No invalid handoff is rewritten into a valid one, with a single
documented exception: a context budget above the permitted maximum is clamped down to it
(``clamped_context_units`` in the admission reason), because a smaller context envelope
can only narrow what the target receives.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from contracts.handoff import HandoffBudget, HandoffRecord, HandoffState, transition
from coordinator.errors import AdmissionDenied


@dataclass(frozen=True)
class ParentAuthority:
    """What the source may hand on: its own envelope, never more."""

    scope: frozenset[str]
    tenant: str
    resources: frozenset[str]
    expires_at: datetime
    remaining: HandoffBudget
    max_context_units: int


@dataclass(frozen=True)
class AdmissionContext:
    """What the coordinator knows when it admits: who exists, what state is current."""

    participants: frozenset[str]
    target_capabilities: Mapping[str, frozenset[str]]
    read_only_skills: frozenset[str]
    current_state_version: int
    active_keys: Collection[str] = field(default_factory=frozenset)
    completed_keys: Collection[str] = field(default_factory=frozenset)


def deny(predicate: str, message: str) -> AdmissionDenied:
    return AdmissionDenied(f"handoff not admitted: {message}", predicate)


def check(record: HandoffRecord, parent: ParentAuthority, ctx: AdmissionContext) -> str:
    """Raise the first failing predicate; return the admission reason otherwise."""
    _check_parties(record, ctx)
    _check_contract(record)
    _check_state(record, ctx)
    _check_authority(record, parent)
    reason = _check_budget(record, parent, ctx)
    _check_duplicates(record, ctx)
    return reason


def admit(record: HandoffRecord, parent: ParentAuthority, ctx: AdmissionContext) -> HandoffRecord:
    """The record moved to ADMITTED (with the one documented clamp applied), or a denial."""
    reason = check(record, parent, ctx)
    budget = record.budget
    assert budget is not None
    clamped = budget.model_copy(
        update={"context_units": min(budget.context_units, parent.max_context_units)}
    )
    return transition(record, HandoffState.ADMITTED, reason, budget=clamped)


def _check_parties(record: HandoffRecord, ctx: AdmissionContext) -> None:
    if record.source not in ctx.participants:
        raise deny("unknown_source", f"source {record.source!r} is not part of this run")
    declared = ctx.target_capabilities.get(record.target)
    if declared is None:
        raise deny("unknown_target", f"target {record.target!r} is not registered")
    if record.skill not in declared:
        raise deny(
            "target_not_registered_for_skill",
            f"{record.target!r} does not declare skill {record.skill!r}",
        )
    missing = sorted(set(record.capabilities) - declared)
    if missing:
        raise deny(
            "capability_not_declared",
            f"{record.target!r} does not declare {', '.join(missing)}",
        )


def _check_contract(record: HandoffRecord) -> None:
    if not record.final_owner:
        raise deny("no_final_owner", "the handoff names no final owner")
    if record.on_timeout is None:
        raise deny("no_timeout_disposition", "the handoff says nothing about a timeout")
    if not record.cancel_ref:
        raise deny("no_cancellation_reference", "the handoff has no cancellation reference")


def _check_state(record: HandoffRecord, ctx: AdmissionContext) -> None:
    if record.state_ref is None or record.state_ref.version != ctx.current_state_version:
        seen = record.state_ref.version if record.state_ref else None
        raise deny(
            "state_version_not_current",
            f"cut from state version {seen}, the run is at {ctx.current_state_version}",
        )


def _check_authority(record: HandoffRecord, parent: ParentAuthority) -> None:
    if not record.scope or not set(record.scope) <= parent.scope:
        raise deny("scope_outside_parent", f"scope {sorted(record.scope)} is not within the run's")
    if record.tenant != parent.tenant:
        raise deny("tenant_outside_parent", f"tenant {record.tenant!r} is not the run's tenant")
    if record.resource is not None and record.resource not in parent.resources:
        raise deny("resource_outside_parent", f"resource {record.resource!r} is not the run's")
    if record.lease_expires_at is None or record.delegation_expires_at is None:
        raise deny("unbounded_request", "the handoff has no lease or no delegation expiry")
    if record.lease_expires_at > parent.expires_at:
        raise deny("lease_after_parent", "the lease ends after the run's own authority")
    if record.delegation_expires_at > parent.expires_at:
        raise deny("lease_after_parent", "the delegation outlives the run's own authority")


def _check_budget(record: HandoffRecord, parent: ParentAuthority, ctx: AdmissionContext) -> str:
    budget = record.budget
    if budget is None or budget.actions < 1:
        raise deny("unbounded_request", "the handoff asks for no bounded budget")
    if budget.effects > 0 and record.skill in ctx.read_only_skills:
        raise deny("effects_on_read_only", f"{record.skill!r} is read-only; effects must be 0")
    for name in ("actions", "effects"):
        if getattr(budget, name) > getattr(parent.remaining, name):
            raise deny(
                "over_budget", f"{name} {getattr(budget, name)} exceed what the run has left"
            )
    if budget.context_units > parent.remaining.context_units:
        raise deny("over_budget", "context units exceed what the run has left")
    for name in ("model_requests", "model_tokens"):
        held, wanted = getattr(parent.remaining, name), getattr(budget, name)
        if held is not None and (wanted is None or wanted > held):
            # A handoff that names no model limit under a run that has one asks for all.
            raise deny("over_budget", f"{name} {wanted} exceed what the run has left ({held})")
    if budget.context_units > parent.max_context_units:
        return f"admitted:clamped_context_units:{parent.max_context_units}"
    return "admitted"


def _check_duplicates(record: HandoffRecord, ctx: AdmissionContext) -> None:
    if record.duplicate_key is None:
        raise deny("unbounded_request", "the handoff has no duplicate key")
    if record.duplicate_key in ctx.active_keys:
        raise deny("duplicate_active", f"{record.duplicate_key!r} is already being worked on")
    if record.duplicate_key in ctx.completed_keys:
        raise deny("duplicate_completed", f"{record.duplicate_key!r} already has a result")
