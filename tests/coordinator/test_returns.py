"""Return admission treats a returned task as untrusted evidence until it passes every check."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.wire import Task
from coordinator.handoff.returns import admit_task

FINDING = {
    "status": "ok",
    "summary": "policy read",
    "facts": {"refund_execution_permitted": False},
    "evidenceIds": ["risk-policy-007"],
}


def task(state: str = "TASK_STATE_COMPLETED", data: Any = FINDING, task_id: str = "t1") -> Task:
    return Task.model_validate(
        {
            "id": task_id,
            "status": {"state": state},
            "artifacts": [{"artifactId": "a", "parts": [{"data": data}]}],
        }
    )


def test_a_valid_finding_is_admitted() -> None:
    """A completed task with one finding citing records we sent is admitted."""
    admission = admit_task(task(), expected_task_id="t1", sent_record_ids={"risk-policy-007"})
    assert admission.admitted and admission.finding is not None
    assert admission.content_hash.startswith("sha256:")


def test_unknown_evidence_is_rejected() -> None:
    """A finding citing a record we never sent is rejected and the id is named."""
    admission = admit_task(task(), expected_task_id="t1", sent_record_ids={"brief-001"})
    assert not admission.admitted
    assert admission.reason == "unknown_evidence: risk-policy-007"


def test_another_task_is_rejected() -> None:
    """A task with an id other than the one we created is not ours to admit."""
    admission = admit_task(task(task_id="t2"), expected_task_id="t1", sent_record_ids=set())
    assert admission.reason == "task_mismatch"


def test_malformed_finding_is_rejected_with_its_problem() -> None:
    """Extra fields in a finding (an attempt to name a new owner, say) reject it."""
    planted = {**FINDING, "nextOwner": "attacker"}
    admission = admit_task(
        task(data=planted), expected_task_id="t1", sent_record_ids={"risk-policy-007"}
    )
    assert not admission.admitted
    assert admission.reason.startswith("finding_invalid")


def test_not_completed_is_not_admitted() -> None:
    """A task that is not COMPLETED is never admitted, whatever its artifacts say."""
    admission = admit_task(
        task(state="TASK_STATE_INPUT_REQUIRED"), expected_task_id="t1", sent_record_ids=None
    )
    assert admission.reason == "not_completed"


def bound(attempt: object, handoff: str = "ho-1") -> Task:
    body = task().model_dump(mode="json", by_alias=True, exclude_none=True)
    body["metadata"] = {"handoffId": handoff, "attempt": attempt}
    return Task.model_validate(body)


@pytest.mark.parametrize(
    ("seen", "handoff", "expected"),
    [
        (2, "ho-1", None),
        (1, "ho-1", None),
        (3, "ho-1", "handoff_mismatch"),
        ("2", "ho-1", "handoff_mismatch"),
        (2, "ho-9", "handoff_mismatch"),
    ],
)
def test_handoff_binding(seen: object, handoff: str, expected: str | None) -> None:
    """Attempt 2 admits its own task or one an earlier attempt created, never another's."""
    admission = admit_task(
        bound(seen, handoff),
        expected_task_id="t1",
        sent_record_ids={"risk-policy-007"},
        expected_handoff=("ho-1", 2),
    )
    assert admission.reason == (expected or "finding_admitted")
