"""`federation evaluate`: three configurations, the same cases and the same acceptance."""

from __future__ import annotations

import asyncio
import json

import pytest

from coordinator.assessment.evaluate import (
    CASES,
    CONFIGURATIONS,
    EXPECTED,
    Outcome,
    accept,
    single_controller,
)
from coordinator.assessment.scenario import PRIVATE_NOTE
from tests.scenarios import Scenario


def test_evaluate_json_offline_has_twelve_passing_rows(offline_evaluation: Scenario) -> None:
    """Offline, 12 rows (3 configurations x 4 cases) all pass and never carry the private note."""
    completed = offline_evaluation
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    rows = document["rows"]
    assert len(rows) == 12
    assert {(r["configuration"], r["case"]) for r in rows} == {
        (c, k) for c in CONFIGURATIONS for k in CASES
    }
    assert all(r["passed"] and r["private_note_absent"] for r in rows)
    assert all(r["model_requests"] == 0 and r["model_tokens"] is None for r in rows)
    assert {r["status"] for r in rows if r["case"] == "conflict"} == {"conflict"}
    calls = {(r["configuration"], r["case"]): r["boundary_calls"] for r in rows}
    assert calls[("single_controller", "ok")] == 0
    assert calls[("sequential", "ok")] == 2 and calls[("parallel", "handoff")] == 3
    assert document["all_passed"] is True and document["model"] is None
    assert PRIVATE_NOTE["text"] not in completed.stdout
    assert any("do not show" in note for note in document["notes"])


@pytest.mark.parametrize("case", CASES)
def test_single_controller_meets_the_same_conditions(case: str) -> None:
    """The single controller applies both rules itself and passes every case unaided."""
    outcome = asyncio.run(single_controller(case))
    assert accept(case, outcome) == (True, True)
    assert outcome.status == EXPECTED[case][0] and outcome.boundary_calls == 0


def test_acceptance_catches_a_leak_and_a_wrong_status() -> None:
    """A returned private note, a wrong status or a missing clarification fails the row."""
    good = asyncio.run(single_controller("handoff"))
    leaked = Outcome(good.status, good.sources, {**good.returned, "note": PRIVATE_NOTE["text"]}, 0)
    assert accept("handoff", leaked) == (False, False)
    wrong = Outcome("ready_for_draft", good.sources, good.returned, 0)
    assert accept("handoff", wrong) == (False, True)
    unclarified = Outcome(good.status, good.sources, {**good.returned, "clarification": None}, 0)
    assert accept("handoff", unclarified)[0] is False
