"""Runs for tests: every run is audited and stored, so tests get theirs from a real
workspace (a SQLite database in a temporary data directory, removed at exit)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from coordinator.handoff.run import Run
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace

_scratch: list[Workspace] = []


def scratch_workspace() -> Workspace:
    """One throwaway workspace per test process."""
    if not _scratch:
        path = Path(tempfile.mkdtemp(prefix="federation-test-"))
        workspace = Workspace(DataDir(path))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        atexit.register(workspace.close)
        _scratch.append(workspace)
    return _scratch[0]


def new_run(owner: str = "coordinator", ws: Workspace | None = None, **fields: Any) -> Run:
    ws = ws or scratch_workspace()
    return Run(owner=owner, trail=ws.trail(), store=ws.run_store(), **fields)
