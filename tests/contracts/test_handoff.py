"""The handoff state table allows exactly its transitions."""

from __future__ import annotations

import pytest

from contracts.handoff import (
    TERMINAL_STATES,
    HandoffRecord,
    HandoffState,
    TransitionError,
    transition,
)

S = HandoffState


def fresh() -> HandoffRecord:
    return HandoffRecord(
        handoff_id="h", run_id="r", source="c", target="t", skill="k", final_owner="c"
    )


def test_happy_path_versions_and_events() -> None:
    """Each step bumps the version and appends an event with its reason."""
    record = fresh()
    for state in (S.ADMITTED, S.DISPATCHED, S.RUNNING, S.RETURNED, S.ACCEPTED):
        record = transition(record, state, f"to-{state.value}")
    assert record.version == 5
    assert [e.state for e in record.events][-1] is S.ACCEPTED
    assert record.terminal


@pytest.mark.parametrize("terminal", sorted(TERMINAL_STATES))
def test_no_transition_leaves_a_terminal_state(terminal: HandoffState) -> None:
    """Once terminal, every further transition is refused."""
    record = fresh().model_copy(update={"state": terminal})
    for target in HandoffState:
        with pytest.raises(TransitionError) as caught:
            transition(record, target, "again")
        assert caught.value.reason == "terminal"


def test_skipping_admission_is_refused() -> None:
    """A proposed handoff cannot be dispatched without being admitted first."""
    with pytest.raises(TransitionError) as caught:
        transition(fresh(), S.DISPATCHED, "skip")
    assert caught.value.reason == "not_allowed"


def test_stale_version_is_refused() -> None:
    """A transition based on an old version of the record is refused."""
    record = transition(fresh(), S.ADMITTED, "ok")
    with pytest.raises(TransitionError) as caught:
        transition(record, S.DISPATCHED, "late", expected_version=0)
    assert caught.value.reason == "stale_version"


def test_returned_is_not_acceptance() -> None:
    """RETURNED can still end REJECTED: a remote completion is not our acceptance."""
    record = fresh()
    for state in (S.ADMITTED, S.DISPATCHED, S.RETURNED, S.REJECTED):
        record = transition(record, state, "x")
    assert record.state is S.REJECTED
