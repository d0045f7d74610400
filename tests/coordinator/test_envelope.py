"""How an ended handoff settles its model envelope, as pure arithmetic over the record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts.handoff import HandoffBudget, HandoffEvent, HandoffRecord, HandoffState, ModelUsage
from coordinator.handoff.envelope import UnitKind, entry, local_spend, model_totals, remaining
from coordinator.handoff.envelope import settlement as settle

LIMIT = HandoffBudget(actions=4, context_units=1_000, effects=0, model_requests=8)


def ended(held: int | None, usage: ModelUsage | None, tokens: int | None = None) -> HandoffRecord:
    return HandoffRecord(
        handoff_id="h",
        run_id="r",
        source="coordinator",
        target="remote-risk",
        skill="risk",
        final_owner="coordinator",
        budget=HandoffBudget(
            actions=1, context_units=100, effects=0, model_requests=held, model_tokens=tokens
        ),
        remote_task_id="task-1",
        state=HandoffState.ACCEPTED,
        remote_model_usage=usage,
        events=(HandoffEvent(state=HandoffState.DISPATCHED, at=datetime.now(UTC), reason="x"),),
    )


def figures(record: HandoffRecord) -> dict[UnitKind, tuple[int | None, int | None]]:
    return {kind: (b.model_requests, b.model_tokens) for kind, b in settle(record)}


@pytest.mark.parametrize(
    ("held", "usage", "tokens", "expected"),
    [
        # within the envelope: consumed what was reported, the rest released
        (
            2,
            ModelUsage(requests=1, total_tokens=60),
            None,
            {"consumed": (1, 60), "released": (1, None)},
        ),
        # nothing reported: nothing consumed
        (2, None, None, {"consumed": (0, None), "released": (2, None)}),
        # beyond the envelope: the excess is spent all the same
        (
            1,
            ModelUsage(requests=3),
            None,
            {"consumed": (1, None), "released": (0, None), "spent": (2, None)},
        ),
        # the run names no model limit: all of it consumed, nothing to release
        (None, ModelUsage(requests=2), None, {"consumed": (2, None), "released": (0, None)}),
        # a token envelope with the tokens unknown stays spent
        (2, ModelUsage(requests=1), 500, {"consumed": (1, None), "released": (1, 0)}),
        (
            2,
            ModelUsage(requests=1, total_tokens=120),
            500,
            {"consumed": (1, 120), "released": (1, 380)},
        ),
    ],
)
def test_settlement(
    held: int | None,
    usage: ModelUsage | None,
    tokens: int | None,
    expected: dict[str, tuple[int | None, int | None]],
) -> None:
    assert figures(ended(held, usage, tokens)) == {UnitKind(k): v for k, v in expected.items()}


def test_what_is_left_counts_envelopes_spends_and_releases() -> None:
    """Reserve 2, the remote used 3 (1 spent beyond), the supervisor 1: 8 - 3 - 1 = 4."""
    record = ended(2, ModelUsage(requests=3, total_tokens=90))
    units = [entry(record, UnitKind.RESERVED, record.budget or LIMIT, "admitted")]
    units += [entry(record, kind, b, "accepted") for kind, b in settle(record)]
    units.append(local_spend("supervisor", 1, 40))
    assert remaining(LIMIT, units).model_requests == 4
    assert model_totals(units) == {"requests": 4, "remote_requests": 3, "total_tokens": 130}
