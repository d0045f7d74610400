"""Every admission predicate denies with its own reason and nothing is admitted."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contracts.handoff import (
    HandoffBudget,
    HandoffRecord,
    HandoffState,
    StateRef,
    TimeoutDisposition,
)
from coordinator.handoff.admission import AdmissionContext, AdmissionDenied, ParentAuthority, admit

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PARENT = ParentAuthority(
    scope=frozenset({"risk:interpret"}),
    tenant="pilot",
    resources=frozenset({"pilot-records"}),
    expires_at=NOW + timedelta(minutes=10),
    remaining=HandoffBudget(actions=4, context_units=10_000, effects=0),
    max_context_units=5_000,
)
CTX = AdmissionContext(
    participants=frozenset({"coordinator"}),
    target_capabilities={"remote-risk": frozenset({"interpret-risk-policy"})},
    read_only_skills=frozenset({"interpret-risk-policy"}),
    current_state_version=3,
    active_keys=frozenset({"busy-key"}),
    completed_keys=frozenset({"done-key"}),
)


def proposal(**changes: Any) -> HandoffRecord:
    base: dict[str, Any] = {
        "handoff_id": "ho-1",
        "run_id": "run-1",
        "source": "coordinator",
        "target": "remote-risk",
        "skill": "interpret-risk-policy",
        "final_owner": "coordinator",
        "state_ref": StateRef(id="run-1", version=3),
        "capabilities": ("interpret-risk-policy",),
        "scope": ("risk:interpret",),
        "tenant": "pilot",
        "resource": "pilot-records",
        "delegation_expires_at": NOW + timedelta(minutes=1),
        "lease_expires_at": NOW + timedelta(minutes=1),
        "budget": HandoffBudget(actions=1, context_units=1_000, effects=0, model_requests=1),
        "cancel_ref": "cancel-run-1",
        "on_timeout": TimeoutDisposition.CONTINUE_WITHOUT_EVIDENCE,
        "duplicate_key": "risk:policy:v3",
    }
    base.update(changes)
    return HandoffRecord(**base)


def test_a_complete_proposal_is_admitted() -> None:
    """A proposal inside the parent's envelope is admitted unchanged."""
    admitted = admit(proposal(), PARENT, CTX)
    assert admitted.state is HandoffState.ADMITTED and admitted.reason == "admitted"


@pytest.mark.parametrize(
    ("changes", "predicate"),
    [
        ({"source": "stranger"}, "unknown_source"),
        ({"target": "nobody"}, "unknown_target"),
        ({"skill": "approve-deployment"}, "target_not_registered_for_skill"),
        ({"capabilities": ("interpret-risk-policy", "payments")}, "capability_not_declared"),
        ({"final_owner": ""}, "no_final_owner"),
        ({"on_timeout": None}, "no_timeout_disposition"),
        ({"cancel_ref": None}, "no_cancellation_reference"),
        ({"state_ref": StateRef(id="run-1", version=2)}, "state_version_not_current"),
        ({"state_ref": None}, "state_version_not_current"),
        ({"scope": ("risk:interpret", "payments:write")}, "scope_outside_parent"),
        ({"scope": ()}, "scope_outside_parent"),
        ({"tenant": "other"}, "tenant_outside_parent"),
        ({"tenant": None}, "tenant_outside_parent"),
        ({"resource": "hr-records"}, "resource_outside_parent"),
        ({"lease_expires_at": NOW + timedelta(hours=1)}, "lease_after_parent"),
        ({"delegation_expires_at": NOW + timedelta(hours=1)}, "lease_after_parent"),
        ({"lease_expires_at": None}, "unbounded_request"),
        ({"budget": None}, "unbounded_request"),
        ({"duplicate_key": None}, "unbounded_request"),
        ({"budget": HandoffBudget(actions=9, context_units=1, effects=0)}, "over_budget"),
        ({"budget": HandoffBudget(actions=1, context_units=20_000, effects=0)}, "over_budget"),
        ({"budget": HandoffBudget(actions=1, context_units=1, effects=1)}, "effects_on_read_only"),
        ({"duplicate_key": "busy-key"}, "duplicate_active"),
        ({"duplicate_key": "done-key"}, "duplicate_completed"),
    ],
)
def test_each_predicate_denies(changes: dict[str, Any], predicate: str) -> None:
    """A proposal failing one predicate is denied with that predicate's reason."""
    with pytest.raises(AdmissionDenied) as caught:
        admit(proposal(**changes), PARENT, CTX)
    assert caught.value.reason == predicate


MODEL_PARENT = dataclasses.replace(
    PARENT,
    remaining=HandoffBudget(actions=4, context_units=10_000, effects=0, model_requests=2),
)


@pytest.mark.parametrize(
    ("model_requests", "admitted"),
    [(0, True), (2, True), (3, False), (None, False)],  # None: no limit named, asks for all
)
def test_a_model_share_over_what_the_run_has_left_is_refused(
    model_requests: int | None, admitted: bool
) -> None:
    budget = HandoffBudget(actions=1, context_units=1, effects=0, model_requests=model_requests)
    if admitted:
        assert admit(proposal(budget=budget), MODEL_PARENT, CTX).budget == budget
        return
    with pytest.raises(AdmissionDenied) as caught:
        admit(proposal(budget=budget), MODEL_PARENT, CTX)
    assert caught.value.reason == "over_budget"


def test_context_budget_is_clamped_not_refused() -> None:
    """The one documented rewrite: context units above the maximum are clamped to it."""
    admitted = admit(
        proposal(budget=HandoffBudget(actions=1, context_units=8_000, effects=0)), PARENT, CTX
    )
    assert admitted.budget == HandoffBudget(actions=1, context_units=5_000, effects=0)
    assert admitted.reason == "admitted:clamped_context_units:5000"
