"""docs/threat-model.md names, for every guarantee, the test in which its forger lies:
each named test module and test function exists, so the table cannot drift from the suite."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "docs" / "threat-model.md"
ROW = re.compile(r"^\| (\d+) \|", re.MULTILINE)
# `tests/x/test_y.py::test_z`, or `::test_z` continuing the last module named in the row
REFERENCE = re.compile(r"`((?:tests/[\w/]+\.py)?)(?:::(\w+))?`")


def _rows() -> list[str]:
    text = MODEL.read_text(encoding="utf-8")
    return [line for line in text.splitlines() if ROW.match(line)]


def _references(row: str) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    module = ""
    for path, name in REFERENCE.findall(row.rsplit("|", 2)[-2]):
        module = path or module
        if module:
            found.append((module, name or None))
    return found


def test_every_row_names_at_least_one_test() -> None:
    rows = _rows()
    assert len(rows) >= 20
    assert all(_references(row) for row in rows), [row[:60] for row in rows if not _references(row)]


def test_every_named_test_exists() -> None:
    missing = []
    for row in _rows():
        for module, name in _references(row):
            source = ROOT / module
            if not source.is_file():
                missing.append(module)
            elif name and not re.search(rf"^def {name}\(", source.read_text(), re.MULTILINE):
                missing.append(f"{module}::{name}")
    assert not missing, missing
