"""The coordinator's SQLite WAL stays bounded however much is written, and an idle
checkpoint truncates it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from coordinator.storage.engine import (
    BUSY_TIMEOUT_SECONDS,
    JOURNAL_SIZE_LIMIT,
    WAL_AUTOCHECKPOINT_PAGES,
    checkpoint,
    open_engine,
    write_transaction,
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


READER = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN")
connection.execute("SELECT count(*) FROM filler").fetchall()
print("reading", flush=True)
sys.stdin.readline()
"""


def test_a_reader_holding_an_old_snapshot_does_not_stall_writes_behind_the_checkpoint(
    tmp_path: Path,
) -> None:
    """An operator's sqlite3 shell or a backup, another process, keeps a read transaction
    open. The idle checkpoint then cannot truncate the WAL; it gives up at once instead of
    holding the write lock while it waits for that reader (for the 30 s busy timeout),
    which stalled every write of the service, and its event loop with them."""
    database = tmp_path / "federation.db"
    engine = open_engine(f"sqlite+pysqlite:///{database}")
    with write_transaction(engine) as connection:
        connection.exec_driver_sql("CREATE TABLE filler (data BLOB)")
        connection.exec_driver_sql("INSERT INTO filler VALUES (?)", (CHUNK,))
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(database)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "reading\n"
        with write_transaction(engine) as connection:  # newer than the reader's snapshot
            connection.exec_driver_sql("INSERT INTO filler VALUES (?)", (CHUNK,))
        checkpointing = threading.Thread(target=checkpoint, args=(engine,))
        checkpointing.start()
        time.sleep(0.5)  # the checkpoint takes the write lock first, as when the service idles
        written = threading.Event()

        def write() -> None:
            with write_transaction(engine) as connection:
                connection.exec_driver_sql("INSERT INTO filler VALUES (?)", (CHUNK,))
            written.set()

        writing = threading.Thread(target=write)
        writing.start()
        # Well under the busy timeout, while the reader still holds its snapshot.
        assert written.wait(BUSY_TIMEOUT_SECONDS / 3), "the write waited behind the checkpoint"
        checkpointing.join(BUSY_TIMEOUT_SECONDS / 3)
        assert not checkpointing.is_alive()
        writing.join()
    finally:
        assert reader.stdin is not None
        reader.stdin.write("done\n")
        reader.stdin.close()
        reader.wait(10)
        engine.dispose()
    checkpoint(engine)  # the reader gone, the WAL is truncated as before
    assert (tmp_path / "federation.db-wal").stat().st_size == 0
