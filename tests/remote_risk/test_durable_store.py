"""The durable store: tasks and used tokens survive a restart; migrations own the schema."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, select

from agent_cards.keys import KeySet, SigningKey
from contracts.wire import Artifact, Message, Part, Role, TaskState, to_wire
from member_kit.storage.engine import DATABASE_FILE, driver_errors, open_engine
from member_kit.storage.migrations import current_revision, migrate
from member_kit.storage.schema import (
    VERSION_TABLE,
    idempotency_keys,
    metadata,
    tasks,
    used_tokens,
)
from member_kit.tasks.sql import SQLTaskStore
from member_kit.trust.sql_replay import SQLReplayGuard
from tests.remote_risk.delegated import delegated_service, refusal_reason
from tests.servers import free_port

HEAD = "rr0012"


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    opened = open_engine(database_url)
    yield opened
    opened.dispose()


def test_tasks_and_used_tokens_survive_a_restart(database_url: str) -> None:
    """A task created before a restart is found by its owner afterwards, a retried send still
    answers it, and the token that created it still cannot create another."""
    port = free_port()
    # its card key persists, as its key directory does: its identity is the same after
    kept = {"database_url": database_url, "signing_keys": KeySet(active=SigningKey.generate())}
    with delegated_service(port, **kept) as (caller, _):
        token = caller.token("h-1")
        created = caller.task_of(caller.send("run-1", "h-1", token=token))
    with delegated_service(port, **kept) as (caller, app):
        found = caller.get_task(created["id"], "h-1").json()["result"]
        assert found["id"] == created["id"]
        assert found["status"] == created["status"]
        assert found["artifacts"] == created["artifacts"]
        retried = caller.task_of(caller.send("run-1", "h-1", attempt=2))
        assert retried["id"] == created["id"]
        replayed = caller.send("run-2", "h-1", token=token)
        assert refusal_reason(replayed) == (401, "replayed_jti")
        assert len(app.state.task_store) == 1


def test_work_cut_off_by_a_stop_is_resumed_when_the_service_starts_again(tmp_path: Path) -> None:
    """A task left unfinished by a stop is resumed by the next start on the same database
    (the stop gave its lease back), and a retried send for its key answers that task."""
    port = free_port()
    slow = {"data_dir": tmp_path, "skill_delay_seconds": 30.0}
    immediately = {"returnImmediately": True}
    with delegated_service(port, **slow) as (caller, _):
        created = caller.task_of(caller.send("run-1", "h-1", configuration=immediately))
        left = caller.get_task(created["id"], "h-1").json()["result"]
        assert left["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    with delegated_service(port, data_dir=tmp_path) as (caller, app):
        retried = caller.task_of(caller.send("run-1", "h-1", attempt=2))
        assert retried["id"] == created["id"]
        assert retried["status"]["state"] == "TASK_STATE_COMPLETED"
        assert len(app.state.task_store) == 1


def test_data_dir_holds_the_sqlite_file_in_wal_mode(tmp_path: Path) -> None:
    """With a data directory the service keeps remote-risk.db there, in WAL mode with
    synchronous=NORMAL, and another principal still sees TaskNotFound after a restart."""
    port = free_port()
    with delegated_service(port, data_dir=tmp_path) as (caller, _):
        created = caller.task_of(caller.send("run-1", "h-1"))
    assert (tmp_path / DATABASE_FILE).is_file()
    with delegated_service(port, data_dir=tmp_path) as (caller, app):
        with app.state.durable_store.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        mallory = type(caller)(caller.base_url, caller.audience, sub="mallory")
        assert mallory.get_task(created["id"], "h-1").json()["error"]["code"] == -32001


def test_migrations_apply_to_an_empty_database_and_are_idempotent(engine: Engine) -> None:
    """An empty database is migrated to head in its own version table; migrating again changes
    nothing, and the tables match the schema objects."""
    assert current_revision(engine) is None
    migrate(engine)
    migrate(engine)
    assert current_revision(engine) == HEAD
    tables = set(inspect(engine).get_table_names())
    assert VERSION_TABLE in tables and "alembic_version" not in tables
    assert all(name.startswith("remote_risk_") for name in tables)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        assert compare_metadata(context, metadata) == []


def test_replay_guard_claims_once_and_purges_expired_rows(engine: Engine) -> None:
    """A jti is claimed once per issuer; rows past their expiry are purged by a later claim."""
    migrate(engine)
    now = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
    clock = [now]
    guard = SQLReplayGuard(engine, lambda: clock[0], leeway=timedelta(seconds=30))
    exp = int(now.timestamp()) + 60
    assert guard.claim_task_creation("jti-1", exp, issuer="iss-a")
    assert not guard.claim_task_creation("jti-1", exp, issuer="iss-a")
    assert guard.claim_task_creation("jti-1", exp, issuer="iss-b")
    clock[0] = now + timedelta(hours=1)
    assert guard.claim_task_creation("jti-2", exp + 3600, issuer="iss-a")
    with engine.connect() as connection:
        left = connection.execute(select(used_tokens.c.issuer, used_tokens.c.jti)).all()
    assert sorted(map(tuple, left)) == [("iss-a", "jti-2")]


def test_a_change_by_another_process_is_not_overwritten(engine: Engine) -> None:
    """A store that last saw a task before another store (another replica) changed its row
    starts its own change from the row: a task the other one finished stays finished, and
    history the other one added is kept."""
    migrate(engine)
    here, there = SQLTaskStore(engine, 10), SQLTaskStore(engine, 10)
    note = Message(message_id="m-1", role=Role.USER, parts=[Part(text="first")])
    record = here.create("alice", note)
    reply = Message(message_id="m-2", role=Role.AGENT, parts=[Part(text="need more")])
    assert there.advance(record.id, TaskState.INPUT_REQUIRED, message=reply)
    further = Message(message_id="m-3", role=Role.USER, parts=[Part(text="more")])
    here.resume(record, further)
    assert [message.message_id for message in record.history] == ["m-1", "m-2", "m-3"]
    assert there.cancel("alice", record.id).state is TaskState.CANCELED
    assert not here.advance(record.id, TaskState.COMPLETED)
    assert here.get("alice", record.id).state is TaskState.CANCELED


def test_a_token_claim_stands_only_with_the_task_it_created(engine: Engine) -> None:
    """The replay guard's claim made while the store creates a task is part of that
    transaction: when the insert fails the jti stays unclaimed, when it succeeds the jti is
    used up, and a refused claim stores no task."""
    migrate(engine)
    store = SQLTaskStore(engine, 10, new_id=lambda: "same-id")
    guard = SQLReplayGuard(engine)
    exp = int(datetime.now(UTC).timestamp()) + 60
    results: list[bool] = []

    def claim(jti: str) -> Callable[[], None]:
        return lambda: results.append(guard.claim_task_creation(jti, exp, issuer="iss"))

    note = Message(message_id="m-1", role=Role.USER, parts=[Part(text="first")])
    store.create("alice", note, "ctx", claim=claim("jti-1"))
    with pytest.raises(driver_errors(engine).IntegrityError):
        store.create("alice", note, "ctx", claim=claim("jti-2"))  # the task id collides
    assert results == [True, True]
    assert used_jtis(engine) == ["jti-1"]
    assert guard.claim_task_creation("jti-2", exp, issuer="iss")
    assert not guard.claim_task_creation("jti-1", exp, issuer="iss")

    def refused() -> None:
        if not guard.claim_task_creation("jti-1", exp, issuer="iss"):
            raise PermissionError("replayed")

    with pytest.raises(PermissionError):
        SQLTaskStore(engine, 10).create("alice", note, claim=refused)
    assert len(store) == 1


def test_a_transaction_stores_the_task_its_claim_and_its_outcome_or_nothing(
    engine: Engine,
) -> None:
    """Inside the store's transaction the insert, the token's claim and the outcome are
    one commit: when the block fails none of them is stored and the jti stays unclaimed."""
    migrate(engine)
    store, guard = SQLTaskStore(engine, 10), SQLReplayGuard(engine)
    exp = int(datetime.now(UTC).timestamp()) + 60
    note = Message(message_id="m-1", role=Role.USER, parts=[Part(text="first")])

    def claim() -> None:
        assert guard.claim_task_creation("jti-1", exp, issuer="iss")

    with pytest.raises(LookupError), store.transaction():
        record = store.create("alice", note, idempotency_key="key-1", claim=claim)
        assert store.advance_through(record.id, TaskState.WORKING, TaskState.COMPLETED)
        raise LookupError("the commit does not happen")
    assert len(store) == 0 and used_jtis(engine) == []
    with store.transaction():
        record = store.create("alice", note, idempotency_key="key-1", claim=claim)
        assert store.advance_through(record.id, TaskState.WORKING, TaskState.COMPLETED)
    assert SQLTaskStore(engine, 10).get("alice", record.id).state is TaskState.COMPLETED
    assert used_jtis(engine) == ["jti-1"]


def test_a_lost_key_race_inside_a_transaction_undoes_only_the_insert_and_claim(
    postgres_url: str,
) -> None:
    """On PostgreSQL, when another replica stored a task under the same idempotency key
    after this one looked (simulated by hiding the first lookup), the key's insert fails
    inside the outer transaction before the claim is made (a savepoint undoes it), the
    transaction goes on and the other task is answered. (On SQLite there is no such race:
    tests/remote_risk/test_keys_in_task_rows.py.)"""
    engine = open_engine(postgres_url)
    migrate(engine)
    store, guard = SQLTaskStore(engine, 10), SQLReplayGuard(engine)
    exp = int(datetime.now(UTC).timestamp()) + 60
    note = Message(message_id="m-1", role=Role.USER, parts=[Part(text="first")])
    first = SQLTaskStore(engine, 10).create("alice", note, idempotency_key="key-1")
    looked = store._keyed
    hidden = [True]

    def keyed_missing_once(*args: object) -> object:
        if hidden.pop() if hidden else False:
            return None
        return looked(*args)  # type: ignore[arg-type]

    store._keyed = keyed_missing_once  # type: ignore[method-assign]
    with store.transaction():
        found = store.create(
            "alice",
            note,
            idempotency_key="key-1",
            claim=lambda: guard.claim_task_creation("jti-2", exp, issuer="iss") and None,
        )
        assert found.id == first.id
        assert store.advance_through(found.id, TaskState.WORKING, TaskState.COMPLETED)
    assert len(store) == 1 and used_jtis(engine) == []
    assert store.get("alice", first.id).state is TaskState.COMPLETED
    engine.dispose()


def test_evictions_are_heard_once_their_transaction_commits(engine: Engine) -> None:
    """An eviction made inside the store's transaction is announced after its commit; when
    the transaction fails the evicted task is still stored and nobody hears of it."""
    migrate(engine)
    store = SQLTaskStore(engine, 2)
    heard: list[tuple[str, str]] = []
    store.on_eviction(lambda owner, task_id: heard.append((owner, task_id)))
    note = Message(message_id="m-1", role=Role.USER, parts=[Part(text="first")])
    oldest = store.create("alice", note)
    store.advance(oldest.id, TaskState.COMPLETED)
    store.create("bob", note)
    with pytest.raises(LookupError), store.transaction():
        store.create("alice", note)
        raise LookupError("the commit does not happen")
    assert heard == [] and store.get("alice", oldest.id).terminal
    with store.transaction():
        store.create("alice", note)
        assert heard == []
    assert heard == [("alice", oldest.id)]


def test_sqlite_keeps_statement_and_savepoint_journals_in_memory(tmp_path: Path) -> None:
    """Partial rollbacks (a savepoint around a task's insert) need no temporary file."""
    engine = open_engine(data_dir=tmp_path, member="remote_risk")
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA temp_store").scalar() == 2  # MEMORY
    finally:
        engine.dispose()


def used_jtis(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        return sorted(connection.scalars(select(used_tokens.c.jti)))


def test_a_rows_json_columns_hold_the_wire_form_of_the_record(engine: Engine) -> None:
    """History, artifacts and status message are stored as the values ``to_wire`` gives
    (a non-finite float as null) and read back into the same models."""
    migrate(engine)
    store = SQLTaskStore(engine, 10)
    data = {"x": float("nan"), "text": "unicodé \u2028 \x01", "n": 2**63, "f": 1e-7}
    note = Message(message_id="m-1", role=Role.USER, parts=[Part(data=data)])
    record = store.create("alice", note)
    artifact = Artifact(artifact_id="a-1", parts=[Part(text="finding ✓", metadata=data)])
    store.advance(record.id, TaskState.COMPLETED, note, [artifact])
    with engine.connect() as connection:
        row = connection.execute(
            select(tasks.c.history, tasks.c.artifacts, tasks.c.status_message)
        ).one()
    current = store.get("alice", record.id)
    assert json.loads(row.history) == [to_wire(message) for message in current.history]
    assert json.loads(row.artifacts) == [to_wire(artifact)]
    assert json.loads(row.status_message) == to_wire(note)
    fresh = SQLTaskStore(engine, 10).get("alice", record.id)
    assert fresh.history == current.history and fresh.artifacts == current.artifacts


def test_a_task_whose_keys_row_is_gone_is_still_found_by_its_key(engine: Engine) -> None:
    """The key's row is purged a refusal window after it expired; the task it opened, if
    still stored, is what the key names until then (one lookup reads both)."""
    migrate(engine)
    store = SQLTaskStore(engine, 10)
    note = Message(message_id="m-1", role=Role.USER, parts=[Part(text="first")])
    first = store.create("alice", note, idempotency_key="key-1")
    with engine.begin() as connection:
        connection.execute(idempotency_keys.delete())
    again = SQLTaskStore(engine, 10).create("alice", note, idempotency_key="key-1")
    assert again.id == first.id and len(store) == 1


def test_a_task_opened_and_settled_in_one_transaction_is_inserted_once(engine: Engine) -> None:
    """Inside the store's transaction a new task's row is written once, at the commit, as
    it ends; its sequence follows the status changes it went through, and another store
    reading it sees what the same steps in separate transactions would have stored."""
    migrate(engine)
    store = SQLTaskStore(engine, 10)
    note = Message(message_id="m-1", role=Role.USER, parts=[Part(text="first")])
    before = store.create("alice", note)  # sequence 1
    artifact = Artifact(artifact_id="a-1", parts=[Part(text="done")])
    with store.transaction():
        record = store.create("alice", note, idempotency_key="key-1")
        with engine.connect() as connection:  # not visible before the commit
            assert connection.scalar(select(tasks.c.id).where(tasks.c.id == record.id)) is None
        assert store.get("alice", record.id).state is TaskState.SUBMITTED
        passed = store.advance_through(
            record.id, TaskState.WORKING, TaskState.COMPLETED, artifacts=[artifact]
        )
        assert passed is not None and passed.state is TaskState.WORKING
    assert record.sequence == before.sequence + 3 and record.state is TaskState.COMPLETED
    stored = SQLTaskStore(engine, 10).get("alice", record.id)
    assert stored.snapshot() == record.snapshot() and stored.sequence == record.sequence
    assert store.find_by_idempotency_key("alice", "key-1") is record
    assert store.advance(record.id, TaskState.FAILED) is False  # terminal, from the row


def test_a_data_part_holding_json_null_is_kept_in_the_stored_task(engine: Engine) -> None:
    """What was received is stored whole: a ``data: null`` part in the history and in an
    artifact reads back from the row (another store, as after a restart) as it came."""
    migrate(engine)
    null_part = {"data": None}
    sent = Message.model_validate(
        {"messageId": "m-1", "role": "ROLE_USER", "parts": [null_part, {"text": "t"}]}
    )
    record = SQLTaskStore(engine, 10).create("alice", sent)
    artifact = Artifact.model_validate({"artifactId": "a", "parts": [null_part]})
    assert SQLTaskStore(engine, 10).advance(record.id, TaskState.COMPLETED, artifacts=[artifact])

    stored = to_wire(SQLTaskStore(engine, 10).get("alice", record.id).snapshot())
    assert stored["history"][0]["parts"] == [null_part, {"text": "t"}]
    assert stored["artifacts"][0]["parts"] == [null_part]
