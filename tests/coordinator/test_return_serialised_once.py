"""Return admission serialises the returned task once (issue 34): the receipt's digest,
the hop receipts its artifacts carry and the artifacts' kept text all come from one
``to_wire`` of the task, with the same verdict and the same kept text as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey, TrustedKeys
from agent_cards.transparency.receipts import (
    RECEIPTS_EXTENSION_URI,
    Bound,
    issue_receipt,
    receipt_claims,
)
from contracts.returns import finding_contract
from contracts.wire import Artifact, Task, to_wire
from coordinator.handoff.receipt_check import ReceiptExpectation, covered_artifacts
from coordinator.handoff.returns import admit_task

KEY = SigningKey.generate()
FINDING = {
    "status": "ok",
    "summary": "Policy forbids refund execution.",
    "facts": {"refund_execution_permitted": False, "privacy_review_required": False},
    "evidenceIds": ["risk-policy-007"],
}


def signed_task() -> Task:
    wire: dict[str, Any] = {
        "id": "task-1",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00.000Z"},
        "artifacts": [{"artifactId": "a1", "parts": [{"data": FINDING}]}],
        "metadata": {"handoffId": "ho-1", "attempt": 1},
    }
    bound = Bound(handoff_id="ho-1", attempt=1, jti=None, req_digest=None)
    issuer = identity_of(KEY.verification_key())
    receipt = issue_receipt(receipt_claims(wire, bound, issuer), KEY)
    wire["metadata"] = {**wire["metadata"], RECEIPTS_EXTENSION_URI: {"receipt": receipt}}
    return Task.model_validate(wire)


def counting(monkeypatch: pytest.MonkeyPatch, model: type[Any], counts: dict[str, int]) -> None:
    original: Callable[..., Any] = model.model_dump

    def dump(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts[model.__name__] = counts.get(model.__name__, 0) + 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(model, "model_dump", dump)


def test_an_admitted_return_with_a_receipt_is_serialised_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task = signed_task()
    keys = TrustedKeys.from_json({"keys": [KEY.public_jwk()]})
    expected = ReceiptExpectation(keys, "ho-1", 1, {}, audience=identity_of(KEY.verification_key()))
    counts: dict[str, int] = {}
    counting(monkeypatch, Task, counts)
    counting(monkeypatch, Artifact, counts)
    admission = admit_task(
        task,
        expected_task_id="task-1",
        contract=finding_contract({"risk-policy-007"}),
        expected_handoff=("ho-1", 1),
        receipt=expected,
    )
    assert admission.admitted, admission.reason
    assert admission.receipt is not None
    assert counts == {"Task": 1}


def test_the_kept_text_is_that_of_each_artifact_alone() -> None:
    """The artifacts' text from the task's wire form is the text of each one dumped alone."""
    task = signed_task()
    alone = covered_artifacts(task)
    assert covered_artifacts(task, to_wire(task)) == alone
    assert '"artifactId":"a1"' in alone
