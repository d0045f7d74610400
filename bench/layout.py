"""The shape of the source: modules per folder, longest modules, function lengths, cycles.

Run from the repository root: ``python -m bench.layout [PATH]`` (default: the four product
packages). It reads the code as text (``ast``) and runs nothing of it. Imports inside
functions count as edges, so a deferred import cannot hide a cycle.
"""

from __future__ import annotations

import ast
import statistics
import sys
from collections import Counter
from pathlib import Path

from tests.test_layers import import_graph, module_files, strongly_connected

PACKAGES = ("contracts", "agent_cards", "coordinator", "remote_risk")


def function_lengths(files: dict[str, Path]) -> list[int]:
    lengths = []
    for path in files.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lengths.append((node.end_lineno or node.lineno) - node.lineno + 1)
    return lengths


def report(root: Path) -> str:
    files = module_files(root, PACKAGES)
    folders = Counter(str(path.parent.relative_to(root)) for path in files.values())
    sizes = sorted(
        ((len(path.read_text().splitlines()), name) for name, path in files.items()), reverse=True
    )
    lengths = sorted(function_lengths(files))
    cycles = [c for c in strongly_connected(import_graph(files)) if len(c) > 1]
    lines = [f"modules: {len(files)}", "modules per folder:"]
    lines += [f"  {folder}: {count}" for folder, count in sorted(folders.items())]
    lines.append("longest modules: " + ", ".join(f"{n} ({size})" for size, n in sizes[:5]))
    p90 = lengths[int(len(lengths) * 0.9)]
    lines.append(f"functions: {len(lengths)}, median {statistics.median(lengths)}, p90 {p90}")
    lines.append(f"import cycles: {len(cycles)}")
    lines += ["  " + " -> ".join(sorted(cycle)) for cycle in cycles]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")))
