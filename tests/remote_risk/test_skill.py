"""The pure risk skill, table-driven over the scenario's cases and malformed records."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contracts.evidence import FindingStatus
from member_kit.errors import SkillFailure
from remote_risk.risk.skill import (
    POLICY_ENGINE_UNAVAILABLE,
    failed_finding,
    input_problems,
    interpret_risk_policy,
)
from tests.remote_risk.conftest import risk_input


@pytest.mark.parametrize(
    ("case", "refunds", "review"),
    [("ok", False, False), ("handoff", False, True), ("conflict", False, False)],
)
def test_ok_finding_states_policy_facts(case: str, refunds: bool, review: bool) -> None:
    """An interpretable case yields ok with the two facts and cites the policy, then the brief."""
    finding = interpret_risk_policy(risk_input(case))
    assert finding.status is FindingStatus.OK
    assert finding.facts == {
        "refund_execution_permitted": refunds,
        "privacy_review_required": review,
    }
    assert finding.evidence_ids == ("risk-policy-007", "brief-001")
    assert finding.error_code is None


def test_refund_fact_follows_the_policy_not_a_constant() -> None:
    """A policy that permits refunds makes the finding say so."""
    context = risk_input("ok")
    context["policy_note"]["refund_execution_permitted"] = True
    finding = interpret_risk_policy(context)
    assert finding.facts["refund_execution_permitted"] is True
    assert "permits refund execution" in finding.summary


def test_real_conversations_without_policy_requirement_need_no_review() -> None:
    """Privacy review is required only when the policy asks for it, not merely because of use."""
    context = risk_input("handoff")
    context["policy_note"]["real_conversations_require_privacy_review"] = False
    assert interpret_risk_policy(context).facts["privacy_review_required"] is False


def test_missing_policy_note_needs_input() -> None:
    """The scenario's missing case yields needs_input naming policy_note, never a guess."""
    finding = interpret_risk_policy(risk_input("missing"))
    assert finding.status is FindingStatus.NEEDS_INPUT
    assert finding.facts == {"missing_inputs": ["policy_note"]}
    assert "refund_execution_permitted" not in finding.facts
    assert finding.evidence_ids == ("brief-001",)


@pytest.mark.parametrize(
    ("record", "field", "value"),
    [
        ("policy_note", "refund_execution_permitted", None),
        ("policy_note", "refund_execution_permitted", "false"),
        ("policy_note", "real_conversations_require_privacy_review", 1),
        ("policy_note", "id", ""),
        ("brief", "uses_real_conversations", 0),
        ("brief", "id", None),
    ],
)
def test_absent_or_mistyped_fields_need_input(record: str, field: str, value: Any) -> None:
    """A field that is absent or of the wrong JSON type is reported missing, not coerced."""
    context = copy.deepcopy(risk_input("ok"))
    if value is None:
        del context[record][field]
    else:
        context[record][field] = value
    finding = interpret_risk_policy(context)
    assert finding.status is FindingStatus.NEEDS_INPUT
    assert finding.facts["missing_inputs"] == [f"{record}.{field}"]


def test_simulate_failure_raises_controlled_failure() -> None:
    """policy_note.simulate_failure true makes the skill fail with policy_engine_unavailable."""
    with pytest.raises(SkillFailure) as raised:
        interpret_risk_policy(risk_input("failure"))
    assert raised.value.error_code == POLICY_ENGINE_UNAVAILABLE


def test_simulate_failure_must_be_exactly_true() -> None:
    """A truthy non-boolean switch does not trigger the failure path."""
    context = risk_input("ok")
    context["policy_note"]["simulate_failure"] = "yes"
    assert interpret_risk_policy(context).status is FindingStatus.OK


def test_failed_finding_carries_code_and_message() -> None:
    """The failed Finding reports the failure's code and readable message and no facts."""
    finding = failed_finding(SkillFailure("policy_engine_unavailable", "Engine down."))
    assert finding.status is FindingStatus.FAILED
    assert finding.error_code == "policy_engine_unavailable"
    assert finding.summary == "Engine down."
    assert finding.facts == {}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (risk_input("ok"), []),
        (risk_input("missing"), []),
        (
            {**risk_input("ok"), "private_note": {}, "operations_note": {}},
            [
                "unexpected keys operations_note, private_note; the risk skill accepts only "
                "brief and policy_note"
            ],
        ),
        (
            {"brief": [], "policy_note": "x"},
            ["brief must be a JSON object", "policy_note must be a JSON object"],
        ),
        ([1, 2], ["must be a JSON object with the keys brief and policy_note"]),
    ],
)
def test_input_problems(data: Any, expected: list[str]) -> None:
    """Only brief and policy_note objects are acceptable input; anything else is named."""
    assert input_problems(data) == expected
