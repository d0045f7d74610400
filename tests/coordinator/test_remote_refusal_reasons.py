"""A remote's refusal is recorded by its reason only when that reason is one of the
protocol's refusal codes: a remote cannot write one of the coordinator's own reasons.

A registered rogue agent on loopback (tests/rogue_agent.py, its own key and signed card)
refuses every send with a delegation refusal (-32090 / -32091) stating a reason of its
choosing. The coordinator drives a real handoff to it. A refusal code the protocol
defines (``scope_insufficient``) is the handoff's reason, as before. Any other text
(``unreachable``, which is the coordinator's own word for a remote it could not reach,
read by the retry window and the CLI's exit code 3) is not: the handoff fails with the
refusal's name, and what the remote stated stays in the outcome's notes. (Before, the
handoff ended ``dispatch_failed:unreachable``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.dispatch.attempt.driver import RemoteOutcome
from coordinator.storage.datadir import DataDir
from tests.coordinator.test_reconcile_counterparty import handoffs_in_one_run, register_rogue
from tests.rogue_agent import Rogue, rogue_agent


@pytest.fixture
def rogue(tmp_path: Path) -> Iterator[tuple[DataDir, Rogue]]:
    data = DataDir(tmp_path / "coordinator")
    with rogue_agent("unset") as agent:
        register_rogue(data, agent)
        yield data, agent


def handoff_to(data: DataDir) -> RemoteOutcome:
    """One handoff to the rogue, driven to its end in this process."""
    _, [outcome] = handoffs_in_one_run(data, "rogue")
    return outcome


def test_a_refusal_code_of_the_protocol_is_the_handoff_s_reason(
    rogue: tuple[DataDir, Rogue],
) -> None:
    data, agent = rogue
    agent.refusal = (-32091, {"reason": "scope_insufficient"})
    outcome = handoff_to(data)
    assert outcome.record.state.value == "FAILED"
    assert outcome.record.reason == "dispatch_failed:scope_insufficient"


@pytest.mark.parametrize(
    ("code", "stated", "named"),
    [
        (-32090, "unreachable", "DelegationUnauthenticatedError"),
        (-32091, "budget_exhausted", "DelegationPermissionDeniedError"),
        (-32090, "InternalError", "DelegationUnauthenticatedError"),
    ],
)
def test_a_remote_s_own_words_are_not_recorded_as_a_reason(
    rogue: tuple[DataDir, Rogue], code: int, stated: str, named: str
) -> None:
    data, agent = rogue
    agent.refusal = (code, {"reason": stated})
    outcome = handoff_to(data)
    assert outcome.record.state.value == "FAILED"
    assert outcome.record.attempt == 1  # a refusal is final: never retried as unreachable
    assert outcome.record.reason == f"dispatch_failed:{named}"
    # nothing received is dropped: the note says what the remote stated
    assert any(repr(stated) in note for note in outcome.notes), outcome.notes
