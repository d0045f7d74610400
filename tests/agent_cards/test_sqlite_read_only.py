"""A connection SQLite opened read-only during a fault is not handed out after it.

SQLite opens a file it cannot write read-only, silently. Both services' engines must not
keep such a connection: once the file is writable again, the next write works (the fault
is made as in :mod:`tests.faults`, ``chattr +i``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine, event, text

from coordinator.storage.engine import open_engine as coordinator_engine
from coordinator.storage.engine import write_transaction as coordinator_write
from member_kit.storage.engine import DATABASE_FILE, driver_write
from member_kit.storage.engine import open_engine as remote_engine
from member_kit.storage.engine import write_transaction as remote_write
from tests.faults import database_files, immutable_flag_works, read_only

ENGINES: dict[str, tuple[Callable[[Path], Engine], Callable[..., object], str]] = {
    "coordinator": (coordinator_engine, coordinator_write, "federation.db"),
    "remote_risk": (
        lambda path: remote_engine(data_dir=path, member="remote_risk"),
        remote_write,
        "remote-risk.db",
    ),
}


def _with_probe_table(tmp_path: Path, service: str) -> tuple[Engine, Callable[..., object], str]:
    """``service``'s engine on a database in ``tmp_path`` holding an empty ``probe``
    table, its write transaction and its file name."""
    open_engine, write_transaction, name = ENGINES[service]
    engine = open_engine(tmp_path)
    with write_transaction(engine) as connection:  # type: ignore[attr-defined]
        connection.execute(text("CREATE TABLE probe (n INTEGER)"))
    return engine, write_transaction, name


@pytest.mark.parametrize("service", sorted(ENGINES))
def test_a_connection_opened_during_the_fault_does_not_outlive_it(
    tmp_path: Path, service: str
) -> None:
    if not immutable_flag_works(tmp_path):
        pytest.skip("this filesystem has no immutable flag (chattr +i)")
    engine, write_transaction, name = _with_probe_table(tmp_path, service)
    engine.dispose()  # the next connection is opened while the file is immutable
    files = database_files(tmp_path / name)
    read_only(files, True)
    try:
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM probe")).scalar() == 0
    finally:
        read_only(files, False)
    with write_transaction(engine) as connection:  # type: ignore[attr-defined]
        connection.execute(text("INSERT INTO probe VALUES (1)"))
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM probe")).scalar() == 1
    engine.dispose()


@pytest.mark.parametrize("service", sorted(ENGINES))
def test_a_connection_opened_while_only_the_wal_was_unwritable_does_not_outlive_it(
    tmp_path: Path, service: str
) -> None:
    """``chattr -i`` on the file and its WAL is two steps: a connection opened between
    them opens the file for writing and the WAL read-only, and is read-only for good. It
    must be replaced as well once both are writable again."""
    if not immutable_flag_works(tmp_path):
        pytest.skip("this filesystem has no immutable flag (chattr +i)")
    engine, write_transaction, name = _with_probe_table(tmp_path, service)
    database, wal = database_files(tmp_path / name)
    keeper = sqlite3.connect(database)  # keeps the WAL from being removed at dispose
    try:
        keeper.execute("SELECT count(*) FROM probe").fetchall()
        engine.dispose()  # the next connection is opened while the WAL is immutable
        read_only([wal], True)
        try:
            with engine.connect() as connection:
                assert connection.execute(text("SELECT count(*) FROM probe")).scalar() == 0
        finally:
            read_only([wal], False)
        with write_transaction(engine) as connection:  # type: ignore[attr-defined]
            connection.execute(text("INSERT INTO probe VALUES (1)"))
    finally:
        keeper.close()
    engine.dispose()


def test_a_member_connection_whose_write_failed_on_a_fault_is_not_used_again(
    tmp_path: Path,
) -> None:
    """A write of the member kit's hot path (a send's claim, its task) that fails on a
    storage fault drops the connection that saw it: however that connection came to be
    broken, the next write is made on a fresh one."""
    if not immutable_flag_works(tmp_path):
        pytest.skip("this filesystem has no immutable flag (chattr +i)")
    engine = remote_engine(data_dir=tmp_path, member="remote_risk")
    with driver_write(engine) as cursor:
        cursor.execute("CREATE TABLE probe (n INTEGER UNIQUE)")
    dropped: list[object] = []
    event.listen(engine, "invalidate", lambda connection, *_: dropped.append(connection))
    files = database_files(tmp_path / DATABASE_FILE)
    read_only(files, True)
    try:
        with pytest.raises(sqlite3.OperationalError), driver_write(engine) as cursor:
            cursor.execute("INSERT INTO probe VALUES (1)")
    finally:
        read_only(files, False)
    assert len(dropped) == 1
    with driver_write(engine) as cursor:
        cursor.execute("INSERT INTO probe VALUES (2)")
    with pytest.raises(sqlite3.IntegrityError), driver_write(engine) as cursor:
        cursor.execute("INSERT INTO probe VALUES (2)")
    assert len(dropped) == 1  # a refusal that is not a fault keeps its connection
    engine.dispose()
