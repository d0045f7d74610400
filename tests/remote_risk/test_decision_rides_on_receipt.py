"""A send's allowed decision rides on its receipt's entry, and is never lost by it.

On SQLite a decision waits for the event loop's next turn or for the next receipt's
transaction; the call allowed with the token a receipt binds is entered in that receipt's
entry (its ``decision`` member) instead of an entry of its own. Every other decision
waiting is entered alone; a receipt already recorded, or a transaction that rolls back,
leaves the decision to be entered alone. Readers take either form through
:func:`agent_cards.transparency.entries.decision_in`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from agent_cards.transparency.entries import DECISION_ON_RECEIPT, decision_in
from member_kit.audit.log import DecisionLedger, heads_after_commit
from member_kit.storage.engine import driver_write, open_engine
from member_kit.storage.migrations import migrate


@pytest.fixture
def sqlite_log(tmp_path: Path) -> Iterator[tuple[DecisionLedger, Engine]]:
    engine = open_engine(f"sqlite+pysqlite:///{tmp_path / 'remote-risk.db'}")
    migrate(engine)
    yield DecisionLedger(engine), engine
    engine.dispose()


def allowed(jti: str, handoff: str = "h") -> dict[str, Any]:
    return {"allowed": True, "reason": "allowed", "jti": jti, "handoff_id": handoff}


def records(log: DecisionLedger) -> list[dict[str, Any]]:
    log.flush()
    size, _ = log.current()
    return [json.loads(entry.canonical) for entry in log.of_handoff("h", size)]


async def send(
    log: DecisionLedger, engine: Engine, key: str, *decisions: dict[str, Any], fails: bool = False
) -> None:
    """As a blocking send on the loop: its decisions taken, then its receipt in its own
    transaction (which fails when ``fails``)."""
    try:
        with heads_after_commit(), driver_write(engine):
            for decision in decisions:
                log.append_later("decision", decision, handoff_id=decision["handoff_id"])
            log.append_covered("receipt", {"jti": "j-1", "task": key}, key=key, handoff_id="h")
            if fails:
                raise RuntimeError("the send's commit fails")
    except RuntimeError:
        assert fails


def test_the_allowed_decision_rides_and_the_others_are_entered_alone(
    sqlite_log: tuple[DecisionLedger, Engine],
) -> None:
    log, engine = sqlite_log
    refused = {**allowed("j-1"), "allowed": False, "reason": "replayed"}
    other = allowed("j-2")
    asyncio.run(send(log, engine, "receipt:t1", refused, allowed("j-1"), other))
    kinds = [(record["kind"], decision_in(record)) for record in records(log)]
    assert kinds == [
        ("decision", refused),  # written before the receipt, in the same insert
        ("decision", other),
        ("receipt", allowed("j-1")),  # one entry: the receipt, the decision riding on it
    ]
    size, root = log.current()
    assert size == 3 and root == log.tree(3).root()


def test_a_receipt_recorded_before_leaves_its_decision_entered_alone(
    sqlite_log: tuple[DecisionLedger, Engine],
) -> None:
    log, engine = sqlite_log
    asyncio.run(send(log, engine, "receipt:t1", allowed("j-1")))
    asyncio.run(send(log, engine, "receipt:t1", {**allowed("j-1"), "at": "again"}))
    written = records(log)
    assert [record["kind"] for record in written] == ["receipt", "decision"]
    assert written[0]["data"][DECISION_ON_RECEIPT] == allowed("j-1")
    assert decision_in(written[1]) == {**allowed("j-1"), "at": "again"}  # not lost
    assert log.current()[1] == log.tree(2).root()


def test_a_decision_whose_receipt_rolls_back_is_entered_alone_after(
    sqlite_log: tuple[DecisionLedger, Engine],
) -> None:
    log, engine = sqlite_log
    asyncio.run(send(log, engine, "receipt:t1", allowed("j-1"), fails=True))
    written = records(log)
    assert [(record["kind"], decision_in(record)) for record in written] == [
        ("decision", allowed("j-1"))
    ]
    assert log.current()[1] == log.tree(1).root()


@pytest.mark.parametrize(
    "record",
    [
        {"kind": "decision", "data": allowed("j-1")},
        {"kind": "receipt", "data": {"jti": "j-1", DECISION_ON_RECEIPT: allowed("j-1")}},
    ],
    ids=["alone", "riding"],
)
def test_either_form_states_the_decision(record: dict[str, Any]) -> None:
    assert decision_in(record) == allowed("j-1")


def test_a_receipt_without_a_decision_and_other_entries_state_none() -> None:
    assert decision_in({"kind": "receipt", "data": {"jti": "j-1"}}) is None
    assert decision_in({"kind": "receipt", "data": {DECISION_ON_RECEIPT: "forged"}}) is None
    assert decision_in({"kind": "other", "data": allowed("j-1")}) is None
    assert decision_in({"kind": "decision", "data": "not an object"}) is None
