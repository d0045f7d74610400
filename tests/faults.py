"""Making a SQLite database read-only for a while, in a way that holds for root.

The tests run as root, for whom permission bits do not stop a write, so the database
file and its WAL are made immutable with ``chattr +i``. The ``-shm`` index is left alone:
SQLite maps it into memory, and a write to an immutable mapping is a SIGBUS. A write on an
open connection then fails with "disk I/O error" and a new connection's with "attempt to
write a readonly database", as on a disk gone read-only; ``chattr -i`` ends the fault.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any


def database_path(app: Any) -> Path:
    """The SQLite file of a member app's database (``app.state.durable_store``)."""
    return Path(app.state.durable_store.engine.url.database)


def database_files(database: Path) -> list[Path]:
    return [database, database.with_name(database.name + "-wal")]


def read_only(files: list[Path], on: bool) -> None:
    """Set (or clear) the immutable flag of ``files`` that exist."""
    existing = [str(path) for path in files if path.exists()]
    if existing:
        flag = "+i" if on else "-i"
        subprocess.run(["chattr", flag, *existing], check=True, capture_output=True)


def immutable_flag_works(directory: Path) -> bool:
    """Whether ``chattr +i`` stops a write here (as root, on this filesystem)."""
    if shutil.which("chattr") is None:
        return False
    probe = directory / "chattr-probe"
    probe.write_text("x")
    try:
        read_only([probe], True)
    except subprocess.CalledProcessError:
        return False
    try:
        with probe.open("a") as handle:
            handle.write("y")
    except OSError:
        return True
    finally:
        read_only([probe], False)
        probe.unlink()
    return False
