"""A connection SQLite opened read-only during a fault is not handed out after it.

SQLite opens a file it cannot write read-only, silently. Both services' engines must not
keep such a connection: once the file is writable again, the next write works (the fault
is made as in :mod:`tests.faults`, ``chattr +i``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from coordinator.storage.engine import open_engine as coordinator_engine
from coordinator.storage.engine import write_transaction as coordinator_write
from member_kit.storage.engine import open_engine as remote_engine
from member_kit.storage.engine import write_transaction as remote_write
from tests.faults import database_files, immutable_flag_works, read_only

ENGINES: dict[str, tuple[Callable[[Path], Engine], Callable[..., object], str]] = {
    "coordinator": (coordinator_engine, coordinator_write, "federation.db"),
    "remote_risk": (lambda path: remote_engine(data_dir=path), remote_write, "remote-risk.db"),
}


@pytest.mark.parametrize("service", sorted(ENGINES))
def test_a_connection_opened_during_the_fault_does_not_outlive_it(
    tmp_path: Path, service: str
) -> None:
    if not immutable_flag_works(tmp_path):
        pytest.skip("this filesystem has no immutable flag (chattr +i)")
    open_engine, write_transaction, name = ENGINES[service]
    engine = open_engine(tmp_path)
    with write_transaction(engine) as connection:  # type: ignore[attr-defined]
        connection.execute(text("CREATE TABLE probe (n INTEGER)"))
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
