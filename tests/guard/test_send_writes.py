"""What one governed send costs the kit's database in front of an a2a-sdk agent, counted.

The stock a2a-sdk agent of ``examples/sdk_member.py`` governed in-process (the guard's
handler, :mod:`member_kit.sdk`), served on loopback with a data directory, its SQLite
connections traced. A send that opens a task makes two writes: before the agent is
asked, the idempotency key looked up, then the token's claim with the grant watched and
the decision-log entries taken so far (one commit, so a replayed token never reaches the
agent); afterwards the task kept as the caller's with its receipt's log entry
and signed head (so no receipt is logged for a task the guard does not keep, nor a task
kept without its receipt).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.faults import database_files, database_path, immutable_flag_works, read_only
from tests.members import SDK
from tests.remote_risk.delegated import delegated_service, refusal_reason
from tests.remote_risk.test_fast_send_path import _traced, _transactions, _writes
from tests.remote_risk.test_stranger_refusals import decisions_after


def _tables_written(transaction: list[str]) -> list[str]:
    """The table each write statement of ``transaction`` names, in order."""
    written = []
    for statement in transaction:
        if _writes(statement):
            words = statement.split()
            written.append(words[2] if words[0] in ("INSERT", "DELETE") else words[1])
    return written


def test_a_send_claims_its_token_with_its_decision_then_keeps_its_task_with_its_receipt(
    tmp_path: Path,
) -> None:
    with delegated_service(member=SDK, data_dir=tmp_path) as (caller, app):
        caller.task_of(caller.send("run-1", "h-0"))  # warm: keys, caches, first entries
        app.state.audit_log.flush()
        statements = _traced(app.state.durable_store.engine)
        task = caller.task_of(caller.send("run-1", "h-1"))
        app.state.audit_log.flush()
        transactions = _transactions(statements)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    writes = [_tables_written(t) for t in transactions]
    assert len(writes) == 2, writes  # two commits, nothing else
    claimed, kept = writes
    # the idempotency key looked up; the claim, the grant watched, the decision: one write
    # before the agent is asked
    assert transactions[0][0].startswith("SELECT task_id FROM remote_risk_guarded_tasks")
    assert claimed == [
        "remote_risk_used_tokens",  # the claim
        "remote_risk_used_tokens",  # its grant watched, in the same row
        "remote_risk_audit_log",
    ]
    # the task inserted (and the oldest beyond the capacity deleted), then the receipt
    assert kept == ["remote_risk_guarded_tasks"] * 2 + ["remote_risk_audit_log"]


def test_a_database_that_cannot_be_written_refuses_the_send_as_the_claim_s(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The claim is a write of its own before the agent is asked: while the database is
    read-only a send is refused 503 ``replay_guard_unavailable``, keeps no task, and the
    database's own error is logged; once it is writable again the next send is kept."""
    if not immutable_flag_works(tmp_path):
        pytest.skip("chattr +i does not stop a write here")
    with delegated_service(member=SDK, data_dir=tmp_path) as (caller, app):
        caller.task_of(caller.send("run-1", "h-0"))
        app.state.audit_log.flush()
        files = database_files(database_path(app))
        read_only(files, True)
        try:
            refused = caller.send("run-1", "h-1")
        finally:
            read_only(files, False)
        assert refusal_reason(refused) == (503, "replay_guard_unavailable")
        assert len(app.state.task_store) == 1  # h-0's
        causes = [r.exc_info[1] for r in caplog.records if r.name.endswith("sql_replay")]
        assert causes and all(isinstance(c, sqlite3.OperationalError) for c in causes)
        assert caller.send("run-1", "h-2").status_code == 200  # the database back


def test_a_replayed_token_s_refusal_inside_the_claim_s_write_is_logged(tmp_path: Path) -> None:
    """A replayed token is refused inside the claim's write, which then rolls back: the
    refusal (decided in it) and the call's decision taken along it are written after
    all, each once."""
    with delegated_service(member=SDK, data_dir=tmp_path) as (caller, app):
        token = caller.token("h-1")
        assert caller.send("run-1", "h-1", token=token).status_code == 200
        app.state.audit_log.flush()
        size = app.state.audit_log.current()[0]
        replayed = caller.send("run-1", "h-1", token=token, key="another")
        assert refusal_reason(replayed) == (401, "replayed_jti")
        app.state.audit_log.flush()
        decided = [(d["allowed"], d["reason"]) for d in decisions_after(app, size)]
    assert decided == [(True, "allowed"), (False, "replayed_jti")]
