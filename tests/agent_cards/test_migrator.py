"""The migrations runner's quick path: a database already at its newest revision is
opened without loading Alembic, and the newest revision it reads from the files is the
one Alembic itself names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from agent_cards.storage.migrator import Migrations, newest_revision
from coordinator.storage.migrations import MIGRATIONS as COORDINATOR
from member_kit.storage.migrations import MIGRATIONS as MEMBER


@pytest.mark.parametrize("migrations", [COORDINATOR, MEMBER], ids=["coordinator", "member"])
def test_the_newest_revision_is_alembics_head(migrations: Migrations) -> None:
    script = ScriptDirectory.from_config(migrations.config())
    assert newest_revision(migrations.directory) == script.get_current_head()


def test_a_branched_history_is_left_to_alembic(tmp_path: Path) -> None:
    versions = tmp_path / "versions"
    versions.mkdir()
    for name, revises in (("a", None), ("b", "a"), ("c", "a")):
        down = f'"{revises}"' if revises else "None"
        text = f'revision: str = "{name}"\ndown_revision: str | None = {down}\n'
        (versions / f"{name}.py").write_text(text)
    assert newest_revision(tmp_path) is None


def test_opening_a_migrated_data_directory_loads_no_alembic(tmp_path: Path) -> None:
    """The second open of a data directory (every CLI command after the first) finds the
    schema current with one query; the first migrates it, with Alembic."""
    program = (
        "import sys; from coordinator.workspace import Workspace; "
        "from coordinator.storage.datadir import DataDir; "
        f"Workspace(DataDir({str(tmp_path)!r})).engine(); "
        "print('alembic' in sys.modules)"
    )
    opened = [
        subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    assert [run.stdout.strip() for run in opened] == ["True", "False"]
