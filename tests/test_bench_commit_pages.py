"""bench.commit_pages: a write-ahead log's frames, each commit's, named by the B-tree
they belong to, read from real SQLite files and from remote_risk's sends."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bench import commit_pages


def test_each_commit_s_pages_are_named_by_their_tree(tmp_path: Path) -> None:
    database = tmp_path / "t.db"
    connection = sqlite3.connect(database, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA wal_autocheckpoint=0")
    connection.execute("CREATE TABLE a (x INTEGER PRIMARY KEY)")
    connection.execute("CREATE TABLE b (x INTEGER PRIMARY KEY, y TEXT)")
    connection.execute("CREATE INDEX ix_b_y ON b (y)")
    commit_pages.truncate_log(database)
    connection.execute("INSERT INTO a VALUES (1)")
    connection.execute("INSERT INTO b VALUES (1, 'one')")
    connection.execute("BEGIN")
    connection.execute("INSERT INTO a VALUES (2)")
    connection.execute("INSERT INTO b VALUES (2, 'two')")
    connection.execute("COMMIT")
    read = commit_pages.read(database)
    connection.close()
    assert read["commits"] == 3
    # a in the first and the third, b and its index in the second and the third
    assert read["trees"] == {"a": 0.67, "b": 0.67, "ix_b_y": 0.67}
    assert read["frames_per_commit"] == 2.0


def test_a_log_without_a_commit_is_refused() -> None:
    with pytest.raises(ValueError, match="no commit"):
        commit_pages.by_tree([(2, False)], {2: "a"})


def test_a_member_s_sends_write_no_tree_for_the_log_s_sequence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run as its command: one commit a send, and the decision log's rows in its table,
    its unique entry key and its handoff index: its ``seq`` is the row id (rr0012)."""
    commit_pages.main(["member", "--count", "20"])
    read = json.loads(capsys.readouterr().out)
    assert (read["side"], read["commits"]) == ("member", 20)
    logs = {name for name in read["trees"] if "audit_log" in name}
    assert logs == {
        "remote_risk_audit_log",
        "sqlite_autoindex_remote_risk_audit_log_1",
        "ix_remote_risk_audit_log_handoff_id",
    }


@pytest.mark.parametrize(
    "argv", [["member", "--count", "0"], ["coordinator", "--count", "2", "--concurrency", "4"]]
)
def test_a_count_it_cannot_read_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        commit_pages.main(argv)
    assert exited.value.code == 2
