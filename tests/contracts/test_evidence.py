"""The merge applies its fixed order and never votes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts.evidence import AssessmentStatus, Finding, FindingStatus, merge

OK_OPS = Finding(
    status=FindingStatus.OK,
    summary="plan",
    facts={"refund_execution_permitted": False},
    evidence_ids=("ops-1",),
)
OK_RISK = Finding(
    status=FindingStatus.OK,
    summary="policy",
    facts={"refund_execution_permitted": False, "privacy_review_required": False},
    evidence_ids=("pol-1",),
)
MISSING = Finding(status=FindingStatus.NEEDS_INPUT, summary="no policy")
FAILED = Finding(status=FindingStatus.FAILED, summary="down", error_code="x")


@pytest.mark.parametrize(
    ("findings", "expected"),
    [
        ([OK_OPS, OK_RISK], AssessmentStatus.READY_FOR_DRAFT),
        ([OK_OPS, MISSING], AssessmentStatus.NEEDS_INPUT),
        ([OK_OPS, FAILED], AssessmentStatus.FAILED),
        ([MISSING, FAILED], AssessmentStatus.FAILED),
        (
            [OK_OPS.model_copy(update={"facts": {"refund_execution_permitted": True}}), OK_RISK],
            AssessmentStatus.CONFLICT,
        ),
        (
            [OK_OPS, OK_RISK.model_copy(update={"facts": {"privacy_review_required": True}})],
            AssessmentStatus.NEEDS_REVIEW,
        ),
    ],
)
def test_merge_order(findings: list[Finding], expected: AssessmentStatus) -> None:
    """Failure beats missing input, which beats conflict, which beats review and success."""
    named = [(f"s{i}", finding) for i, finding in enumerate(findings)]
    assert merge(named).status is expected


def test_conflict_is_preserved_with_both_values() -> None:
    """A conflict names the fact and keeps each specialist's value for reconciliation."""
    ops = OK_OPS.model_copy(update={"facts": {"refund_execution_permitted": True}})
    assessment = merge([("operations", ops), ("risk", OK_RISK)])
    assert assessment.conflicts[0].values == {"operations": True, "risk": False}


def test_sources_keep_every_evidence_id_once() -> None:
    """Sources list each cited record once, in order of appearance."""
    assert merge([("a", OK_OPS), ("b", OK_RISK), ("c", OK_OPS)]).sources == ("ops-1", "pol-1")


def test_finding_refuses_unknown_status_and_fields() -> None:
    """A Finding with an unknown status or an extra field does not parse."""
    with pytest.raises(ValidationError):
        Finding.model_validate({"status": "approved", "summary": "s"})
    with pytest.raises(ValidationError):
        Finding.model_validate({"status": "ok", "summary": "s", "owner": "me"})
