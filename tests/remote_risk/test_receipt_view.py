"""A receipt's claims are taken from the members of the task they read, not from a dump of
the whole task: the same claims, byte for byte, for every shape of artifact."""

from __future__ import annotations

import pytest

from agent_cards.transparency.receipts import Bound, receipt_claims
from contracts.canonical import canonical_json
from contracts.wire import Task, to_wire
from member_kit.audit.receipts import receipt_view

STATUS = {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00.000Z"}
HISTORY = [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "in"}]}]
ARTIFACTS = [
    {"artifactId": "a", "parts": [{"data": None}, {"text": "é\u007f"}], "metadata": {"k": None}},
    {"artifactId": "b", "name": "n", "parts": [{"data": {"x": [1, 2.5, None]}}]},
]


@pytest.mark.parametrize(
    "artifacts", [None, [], ARTIFACTS], ids=["no-artifacts", "empty", "artifacts"]
)
def test_the_claims_are_those_of_the_whole_task(artifacts: list[dict[str, object]] | None) -> None:
    wire = {"id": "t", "contextId": "c", "status": STATUS, "history": HISTORY,
            "metadata": {"handoffId": "h"}}  # fmt: skip
    if artifacts is not None:
        wire["artifacts"] = artifacts
    task = Task.model_validate(wire)
    bound = Bound(handoff_id="h", attempt=1, jti="j", req_digest=None)
    whole = receipt_claims(to_wire(task), bound, "risk")
    assert canonical_json(receipt_claims(receipt_view(task), bound, "risk")) == canonical_json(
        whole
    )
    assert whole["artifact_digest"] and whole["state"] == "TASK_STATE_COMPLETED"
