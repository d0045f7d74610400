"""Scenarios run once for the whole test session, shared by the tests that only read them.

A scenario is a real run of the CLI as its own process (``federation evaluate``, say) in a
data directory of its own. Under pytest-xdist each worker is a process with its own
fixtures, so a session fixture alone would run the scenario once per worker: here the
first worker to ask runs it, under a lock, in a directory beside every worker's temporary
directory, and records the process's exit code and output; the others wait on the lock
and read the record. A test that changes a data directory never uses a shared one: it
runs its own scenario in its own ``tmp_path``.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

# Environment variables a scenario never inherits: it runs offline, on its own data.
FOREIGN = ("FEDERATION_MODEL", "REMOTE_RISK_MODEL", "FEDERATION_SERVER", "FEDERATION_DATA_DIR")


@dataclass(frozen=True)
class Scenario:
    """One CLI run: where its data is, and what the process said."""

    data: Path
    returncode: int
    stdout: str
    stderr: str


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The directory every worker of this session sees (the parent of each worker's own)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_cli_run(
    factory: pytest.TempPathFactory, name: str, *args: str, data_dir: bool = True
) -> Scenario:
    """``python -m coordinator ARGS`` run once per session under ``name``, offline; with
    ``data_dir`` in a data directory of its own, otherwise with none given (the CLI picks
    a throwaway one, no ``FEDERATION_*`` variable set and ``XDG_DATA_HOME`` pointing at an
    empty ``home`` beside it)."""
    root = shared_root(factory)
    record = root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            scenario = _run(root / name, args, data_dir)
            written = record.with_suffix(".partial")
            written.write_text(json.dumps({**asdict(scenario), "data": str(scenario.data)}))
            written.replace(record)
    document = json.loads(record.read_text())
    return Scenario(**{**document, "data": Path(document["data"])})


def _run(directory: Path, args: tuple[str, ...], data_dir: bool) -> Scenario:
    directory.mkdir(parents=True, exist_ok=True)
    foreign = FOREIGN if data_dir else ("FEDERATION_",)
    env = {key: value for key, value in os.environ.items() if not key.startswith(foreign)}
    data = directory / "data"
    if data_dir:
        env["FEDERATION_DATA_DIR"] = str(data)
    else:
        env["XDG_DATA_HOME"] = str(directory / "home")
    completed = subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    return Scenario(data, completed.returncode, completed.stdout, completed.stderr)
