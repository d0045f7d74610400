"""Receipts of the sends that share one turn's transaction (SQLite, issue 34).

Under load many blocking sends share one turn of the member's event loop, so one write
transaction (:func:`member_kit.storage.engine.in_turn`). Each states the decision log's
size and root covering its receipt. The log as that transaction has extended it so far is
known to the process that extended it, so a send builds on it: it neither reads back nor
hashes again the entries of the sends before it in the same turn (which made a turn's
receipts cost the square of its sends). A send undone alone (its savepoint rolled back)
takes its entries with it, and the sends after it state the log without them. Every root
stated is the root of the whole tree once the turn commits. Real SQLite files.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, event

from member_kit.audit.log import DecisionLedger, heads_after_commit
from member_kit.storage.engine import driver_write, in_turn, open_engine
from member_kit.storage.migrations import migrate


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = open_engine(f"sqlite+pysqlite:///{tmp_path / 'remote-risk.db'}")
    migrate(engine)
    yield engine
    engine.dispose()


def traced(engine: Engine) -> list[str]:
    statements: list[str] = []

    @event.listens_for(engine, "connect")
    def _trace(connection: sqlite3.Connection, _record: object) -> None:
        connection.set_trace_callback(statements.append)

    engine.dispose()  # connections opened from now on are traced
    return statements


Stated = tuple[int, bytes] | RuntimeError


async def send(log: DecisionLedger, engine: Engine, name: str, *, fails: bool = False) -> Stated:
    """A send's receipt in the turn's transaction, as the agent states it; ``fails``:
    the send fails after its receipt, so its work is undone alone."""

    def work() -> tuple[int, bytes]:
        with driver_write(engine):
            covered = log.append_covered(
                "receipt", {"t": name}, key=f"receipt:{name}", handoff_id="h"
            )
            if fails:
                raise RuntimeError(f"send {name} fails after its receipt")
        return covered

    try:
        with heads_after_commit():
            return await in_turn(engine, work)
    except RuntimeError as error:
        return error


def run_turn(log: DecisionLedger, engine: Engine, sends: list[tuple[str, bool]]) -> list[Stated]:
    async def turn() -> list[Stated]:
        return await asyncio.gather(*(send(log, engine, n, fails=f) for n, f in sends))

    return asyncio.run(turn())


def test_a_turn_s_receipts_read_back_nothing_and_each_states_the_whole_tree(
    engine: Engine,
) -> None:
    log = DecisionLedger(engine)
    log.append("decision", {"i": 0})
    log.current()
    statements = traced(engine)
    stated = run_turn(log, engine, [(f"s{i}", False) for i in range(16)])
    read_back = [s for s in statements if s.startswith("SELECT hash")]
    assert read_back == [], "a send read back the entries of the sends before it"
    assert stated == [(size, log.tree(size).root()) for size in range(2, 18)]
    assert log.current() == (17, log.tree(17).root())


def test_a_send_undone_alone_takes_its_entries_out_of_the_roots_stated_after_it(
    engine: Engine,
) -> None:
    """The failed send's entry had the size the next send's takes: the root stated after
    it must be of the entry that stayed, not of the one undone."""
    log = DecisionLedger(engine)
    stated = run_turn(log, engine, [("a", False), ("b", True), ("c", False), ("d", True)])
    assert isinstance(stated[1], RuntimeError) and isinstance(stated[3], RuntimeError)
    assert stated[0] == (1, log.tree(1).root())
    assert stated[2] == (2, log.tree(2).root())
    assert log.current() == (2, log.tree(2).root())
    again = run_turn(log, engine, [("e", False)])
    assert again == [(3, log.tree(3).root())]
