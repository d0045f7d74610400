"""remote_risk is another team's service: nothing in it imports the coordinator."""

from __future__ import annotations

import ast
from pathlib import Path

import remote_risk

PACKAGE = Path(remote_risk.__file__).parent


def imported_modules(source: str) -> set[str]:
    """Every module a file imports, at top level or deferred inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_remote_risk_imports_nothing_from_the_coordinator() -> None:
    """Including deferred imports: the two services share only contracts and agent_cards."""
    offending = {
        str(path.relative_to(PACKAGE)): sorted(
            name
            for name in imported_modules(path.read_text(encoding="utf-8"))
            if name == "coordinator" or name.startswith("coordinator.")
        )
        for path in PACKAGE.rglob("*.py")
    }
    assert {path: names for path, names in offending.items() if names} == {}
