"""The coordinator's SQLite WAL stays bounded however much is written, and an idle
checkpoint truncates it."""

from __future__ import annotations

from pathlib import Path

from coordinator.storage import open_engine, write_transaction
from coordinator.storage.engine import (
    JOURNAL_SIZE_LIMIT,
    WAL_AUTOCHECKPOINT_PAGES,
    checkpoint,
)

CHUNK = b"x" * 100_000


def test_the_wal_stays_bounded_and_an_idle_checkpoint_truncates_it(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite+pysqlite:///{tmp_path / 'federation.db'}")
    wal = tmp_path / "federation.db-wal"
    try:
        with write_transaction(engine) as connection:
            connection.exec_driver_sql("CREATE TABLE filler (data BLOB)")
        page = 4096
        bound = max(JOURNAL_SIZE_LIMIT, WAL_AUTOCHECKPOINT_PAGES * page) + 64 * page
        largest = 0
        for _ in range(500):  # 50 MB in 100 KB transactions
            with write_transaction(engine) as connection:
                connection.exec_driver_sql("INSERT INTO filler VALUES (?)", (CHUNK,))
            largest = max(largest, wal.stat().st_size)
        assert largest <= bound, (largest, bound)
        checkpoint(engine)
        assert wal.stat().st_size == 0
    finally:
        engine.dispose()
