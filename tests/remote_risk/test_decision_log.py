"""remote_risk's decision log as a Merkle log, in memory and in each database.

The root kept as a compact range (extended with what was appended since) is the root of
the whole tree; every entry's inclusion proof and every consistency proof verifies; an
entry with a key is recorded once; a signed head verifies with the card key only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey, TrustedKeys
from agent_cards.transparency import merkle
from agent_cards.transparency.heads import verify_head
from agent_cards.transparency.statements import StatementInvalid
from member_kit.audit.log import DecisionLedger, entry_proofs, heads_after_commit
from member_kit.storage.engine import driver_write, open_engine
from member_kit.storage.migrations import migrate

KEY = SigningKey.generate()


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DecisionLedger]:
    if request.param == "memory":
        yield DecisionLedger()
        return
    url = (
        f"sqlite+pysqlite:///{tmp_path / 'remote-risk.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    engine = open_engine(url)
    migrate(engine)
    yield DecisionLedger(engine)
    engine.dispose()


def test_the_kept_root_is_the_root_of_the_whole_tree(log: DecisionLedger) -> None:
    for batch in (1, 2, 7):
        for i in range(batch):
            log.append("decision", {"i": i}, handoff_id=f"h-{i % 3}")
        size, root = log.current()
        assert root == log.tree(size).root()
    assert size == 10


def test_proofs_verify_and_keyed_entries_are_recorded_once(log: DecisionLedger) -> None:
    for i in range(5):
        log.append("decision", {"i": i}, handoff_id="h-1" if i % 2 else "h-2")
    assert log.append("receipt", {"task_id": "t"}, key="receipt:t", handoff_id="h-1")
    assert not log.append("receipt", {"task_id": "t"}, key="receipt:t", handoff_id="h-1")
    head = log.sign_head(KEY, "risk")
    assert head.tree_size == 6
    tree = log.tree(head.tree_size)
    for entry in entry_proofs(log.of_handoff("h-1", head.tree_size), tree):
        leaf = merkle.leaf_hash(bytes.fromhex(entry["hash"]))
        proof = [bytes.fromhex(node) for node in entry["inclusion_proof"]]
        assert merkle.verify_inclusion(entry["seq"] - 1, 6, leaf, proof, head.root)
    for old in range(7):
        old_root = log.tree(old).root()
        proof = log.consistency(old, 6)
        assert merkle.verify_consistency(old, 6, old_root, head.root, proof)


def test_a_head_verifies_with_the_card_key_only(log: DecisionLedger) -> None:
    """A head verifies with the card key, in that key's name only: another key is
    untrusted_key, and a head naming any issuer but its key's identity is refused even
    by its own key (issuer_mismatch)."""
    log.append("decision", {"i": 1})
    head = log.sign_head(KEY, identity_of(KEY.verification_key()))
    assert verify_head(head.jws, TrustedKeys([KEY.verification_key()])) == head
    other = SigningKey.generate()
    with pytest.raises(StatementInvalid) as refused:
        verify_head(head.jws, TrustedKeys([other.verification_key()]))
    assert refused.value.reason == "untrusted_key"
    in_another_name = log.sign_head(KEY, identity_of(other.verification_key()))
    with pytest.raises(StatementInvalid) as refused:
        verify_head(
            in_another_name.jws, TrustedKeys([KEY.verification_key(), other.verification_key()])
        )
    assert refused.value.reason == "issuer_mismatch"


def test_decisions_queued_together_land_together_and_in_order(log: DecisionLedger) -> None:
    """Decisions handed to the log's own thread from many threads at once are all
    written (consecutive seqs, each once, the tree whole), whatever batches they formed;
    one that cannot be written (its data cannot be canonicalised) costs only itself."""
    import threading

    def decide(worker: int) -> None:
        for i in range(25):
            log.append_later("decision", {"worker": worker, "i": i}, handoff_id=f"h-{worker}")

    threads = [threading.Thread(target=decide, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    # a log in memory appends at once, and the caller sees the refusal
    with contextlib.suppress(ValueError):
        log.append_later("decision", {"bad": float("nan")}, handoff_id="h-bad")
    for thread in threads:
        thread.join()
    log.flush()
    size, root = log.current()
    assert size == 200 and root == log.tree(size).root()
    for worker in range(8):
        entries = log.of_handoff(f"h-{worker}", size)
        assert [json.loads(e.canonical)["data"]["i"] for e in entries] == list(range(25))
    assert [e.seq for e in log.of_handoff("h-bad", size)] == []


def test_replicas_appending_at_once_lose_no_entry_and_fail_no_append(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Two replicas on one PostgreSQL (each its own engine and decision-log thread), each
    appending receipts from four threads while its thread writes decisions: every append
    succeeds and every entry is in the log once. Before, the appenders raced for the next
    seq and the losers retried; under this load some ran out of retries (a receipt's
    send failed) and some decisions were dropped with an error in the log."""
    import threading

    engines = [open_engine(postgres_url) for _ in range(2)]
    migrate(engines[0])
    replicas = [DecisionLedger(engine) for engine in engines]
    failures: list[BaseException] = []

    def receipts(replica: int, worker: int) -> None:
        for i in range(40):
            try:
                replicas[replica].append("receipt", {"i": i}, key=f"r-{replica}-{worker}-{i}")
            except Exception as exc:
                failures.append(exc)
            replicas[replica].append_later("decision", {"i": i}, f"d-{replica}-{worker}")

    threads = [
        threading.Thread(target=receipts, args=(replica, worker))
        for replica in range(2)
        for worker in range(4)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for replica in replicas:
            replica.flush()
        size, root = replicas[0].current()
        assert failures == []
        assert [r.message for r in caplog.records if "could not be written" in r.message] == []
        assert size == 2 * 4 * 40 * 2 and root == replicas[1].tree(size).root()
    finally:
        for engine in engines:
            engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_log(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[DecisionLedger, Engine]]:
    url = (
        f"sqlite+pysqlite:///{tmp_path / 'remote-risk.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    engine = open_engine(url)
    migrate(engine)
    yield DecisionLedger(engine), engine
    engine.dispose()


def test_a_log_stated_in_a_transaction_that_rolls_back_leaves_the_kept_root_whole(
    sql_log: tuple[DecisionLedger, Engine],
) -> None:
    """A receipt's entry and the log's size and root covering it, written inside a send's
    own transaction (one write per send, :func:`~member_kit.audit.log.heads_after_commit`):
    when that transaction rolls back, its entries are gone, the kept range is not extended
    by them, and the decision the receipt took along is written after all; when it
    commits, the kept range is extended. Either way every root stated is the root of the
    whole tree."""
    log, engine = sql_log
    log.append("decision", {"i": 0})
    log.current()
    asyncio.run(_receipt_rolled_back(log, engine))
    log.flush()
    size, root = log.current()
    assert (size, root) == (2, log.tree(2).root())  # the decision, written after all
    with heads_after_commit(), driver_write(engine):
        size, root = log.append_covered("receipt", {"t": 2}, key="receipt:t2", handoff_id="h")
    assert size == 3 and root == log.tree(3).root()
    assert log.current() == (3, root)


async def _receipt_rolled_back(log: DecisionLedger, engine: Engine) -> None:
    """On the event loop, as a send: a decision, then the receipt in the send's own
    transaction, which then fails."""
    with pytest.raises(RuntimeError), heads_after_commit(), driver_write(engine):
        log.append_later("decision", {"i": 1}, handoff_id="h")  # on SQLite: with the receipt
        size, _ = log.append_covered("receipt", {"t": 1}, key="receipt:t1", handoff_id="h")
        assert size in (2, 3)  # on PostgreSQL the decision is the thread's
        raise RuntimeError("the send's commit fails")


def test_decisions_taken_along_a_claim_are_written_with_it_or_queued_again(
    sql_log: tuple[DecisionLedger, Engine],
) -> None:
    """The decisions waiting for the loop, taken along a guarded send's claim
    (:meth:`~member_kit.audit.log.DecisionLedger.append_waiting`): on SQLite written in
    that transaction when it commits, queued again when it rolls back; never lost nor
    written twice. Outside :func:`~member_kit.audit.log.heads_after_commit` none is
    taken (nothing would queue it again)."""
    log, engine = sql_log

    async def claim(i: int, fails: bool, *, watched: bool = True) -> int:
        with contextlib.ExitStack() as stack:
            stack.enter_context(contextlib.suppress(RuntimeError))
            if watched:
                stack.enter_context(heads_after_commit())
            stack.enter_context(driver_write(engine))
            log.append_later("decision", {"i": i}, handoff_id="h")
            log.append_waiting()
            if fails:
                raise RuntimeError("the claim's commit fails")
        return log.current()[0]  # before the loop's next turn

    written_with_the_claim = asyncio.run(claim(1, fails=False))
    if engine.dialect.name == "sqlite":  # on PostgreSQL the decision is the thread's
        assert written_with_the_claim == 1
    asyncio.run(claim(2, fails=True))
    asyncio.run(claim(3, fails=False, watched=False))
    log.flush()
    size, root = log.current()
    assert root == log.tree(size).root()
    written = sorted(json.loads(e.canonical)["data"]["i"] for e in log.of_handoff("h", size))
    assert written == [1, 2, 3]


def test_a_receipt_with_waiting_decisions_takes_three_statements_and_covers_replicas(
    tmp_path: Path,
) -> None:
    """A receipt's entry, the decisions waiting for the loop and the hashes its size and
    root cover take two statements (last seq, one insert of both that skips a recorded key), not
    one pass per part; what another replica appended behind the kept range is still covered (then
    read back), and a receipt already recorded writes only the decisions."""
    import sqlite3

    from sqlalchemy import event

    engine = open_engine(f"sqlite+pysqlite:///{tmp_path / 'remote-risk.db'}")
    migrate(engine)
    statements: list[str] = []

    @event.listens_for(engine, "connect")
    def _trace(connection: sqlite3.Connection, _record: object) -> None:
        connection.set_trace_callback(statements.append)

    engine.dispose()  # connections opened from now on are traced
    log, replica = DecisionLedger(engine), DecisionLedger(engine)
    log.append("decision", {"i": 0})
    log.current()

    async def receipt(key: str) -> tuple[int, bytes]:
        with heads_after_commit(), driver_write(engine):
            log.append_later("decision", {"i": key}, handoff_id="h")
            statements.clear()
            covered = log.append_covered("receipt", {"t": key}, key=key, handoff_id="h")
            written = [s.split()[0] for s in statements]
        # the decision's and the receipt's rows are one INSERT
        assert written == ["SELECT", "INSERT"], statements
        return covered

    assert asyncio.run(receipt("receipt:a")) == (3, log.tree(3).root())
    replica.append("decision", {"from": "replica"})
    with heads_after_commit(), driver_write(engine):
        covered = log.append_covered("receipt", {"t": "b"}, key="receipt:b", handoff_id="h")
    assert covered == (5, log.tree(5).root())
    with heads_after_commit(), driver_write(engine):
        again = log.append_covered("receipt", {"t": "b"}, key="receipt:b", handoff_id="h")
    assert again == covered
    assert log.current() == covered
    engine.dispose()


def test_on_sqlite_the_log_s_seq_is_its_row_id_and_the_migration_keeps_it_whole(
    database_url: str,
) -> None:
    """rr0012: on SQLite an entry's ``seq`` is the row id, with no B-tree of its own beside
    the table's (one page less a send's commit); the table built again keeps every entry,
    its keys still recorded once, and the log's root; the log goes on from it. On
    PostgreSQL the revision changes nothing."""
    engine = open_engine(database_url)
    try:
        migrate(engine, "rr0011")
        before = DecisionLedger(engine)
        for i in range(3):
            before.append("decision", {"i": i}, handoff_id=f"h-{i}")
        assert before.append("receipt", {"task_id": "t"}, key="receipt:t", handoff_id="h-1")
        size, root = before.current()
        migrate(engine)
        after = DecisionLedger(engine)
        assert after.current() == (size, root) == (4, after.tree(4).root())
        assert not after.append("receipt", {"task_id": "t"}, key="receipt:t", handoff_id="h-1")
        after.append("decision", {"i": 4}, handoff_id="h-4")
        assert after.current()[0] == 5
        if engine.dialect.name == "sqlite":
            with engine.connect() as connection:
                named = connection.exec_driver_sql(
                    "SELECT name FROM sqlite_master WHERE tbl_name = 'remote_risk_audit_log'"
                )
                assert {name for (name,) in named} == {
                    "remote_risk_audit_log",
                    "sqlite_autoindex_remote_risk_audit_log_1",  # the entry key, unique
                    "ix_remote_risk_audit_log_handoff_id",
                }
                pairs = connection.exec_driver_sql("SELECT rowid, seq FROM remote_risk_audit_log")
                assert [rowid for rowid, seq in pairs if rowid != seq] == []
    finally:
        engine.dispose()
