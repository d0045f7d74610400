"""Whose each upstream task is, kept by the guard: the same rules in memory and in its
database (SQLite and PostgreSQL), and the database's record outlives the process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from member_kit import errors
from member_kit.guard.sql_tasks import SQLGuardedTasks
from member_kit.guard.tasks import GuardedTasks, TaskOwners
from member_kit.storage.engine import open_engine
from member_kit.storage.migrations import migrate
from tests.remote_risk.conftest import database_url, postgres_server, postgres_url

__all__ = ["database_url", "postgres_server", "postgres_url"]

BINDING = {"handoffId": "h-1", "attempt": 1}


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    yield from _migrated(database_url)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def owners(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskOwners]:
    if request.param == "memory":
        yield GuardedTasks(capacity=3)
        return
    url = f"sqlite:///{tmp_path / 'guard.db'}"
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
    for engine in _migrated(url):
        yield SQLGuardedTasks(engine, capacity=3)


def _migrated(url: str) -> Iterator[Engine]:
    engine = open_engine(url)
    migrate(engine)
    yield engine
    engine.dispose()


def test_a_task_is_its_owner_s_and_reads_as_missing_to_another(owners: TaskOwners) -> None:
    owners.remember("t-1", "alice", BINDING, "key-1")
    assert owners.get("alice", "t-1").metadata == BINDING
    assert owners.binding("alice", "t-1") == BINDING
    assert owners.binding("bob", "t-1") is None
    with pytest.raises(errors.TaskNotFound):
        owners.get("bob", "t-1")
    assert owners.opened_under("alice", "key-1") == "t-1"
    assert owners.opened_under("bob", "key-1") is None


def test_a_task_named_to_a_second_caller_stays_the_first_s(owners: TaskOwners) -> None:
    owners.remember("t-1", "alice", BINDING)
    assert owners.remember("t-1", "alice", BINDING).owner == "alice"
    with pytest.raises(errors.UpstreamFailure) as caught:
        owners.remember("t-1", "bob", BINDING)
    assert caught.value.reason == "upstream_task_reused"


def test_the_oldest_go_first_with_their_keys(owners: TaskOwners) -> None:
    for n in range(1, 5):
        owners.remember(f"t-{n}", "alice", {"n": n}, f"key-{n}")
    assert len(owners) == 3
    assert owners.owned_by("alice", 10) == ["t-4", "t-3", "t-2"]
    assert owners.owned_by("alice", 2) == ["t-4", "t-3"]
    assert owners.opened_under("alice", "key-1") is None
    assert owners.metadata_of("t-1") == {}
    assert owners.metadata_of("t-2") == {"n": 2}


def test_the_database_record_is_there_for_the_next_process(engine: Engine) -> None:
    SQLGuardedTasks(engine, capacity=3).remember("t-1", "alice", BINDING, "key-1")
    again = SQLGuardedTasks(engine, capacity=3)
    assert again.get("alice", "t-1").metadata == BINDING
    assert again.opened_under("alice", "key-1") == "t-1"


def test_a_key_another_guard_kept_for_another_task_records_nothing(engine: Engine) -> None:
    """Two guards on one database: the task the second records under a key the first
    already kept for another task is refused, and nothing of it is kept."""
    first, second = SQLGuardedTasks(engine, capacity=3), SQLGuardedTasks(engine, capacity=3)
    first.remember("t-1", "alice", BINDING, "key-1")
    with pytest.raises(errors.UpstreamFailure) as caught:
        second.remember("t-2", "alice", BINDING, "key-1")
    assert caught.value.reason == "upstream_task_reused"
    assert second.find("t-2") is None and len(second) == 1
    assert second.opened_under("alice", "key-1") == "t-1"
