"""The slow tier: the tests ``make test-fast`` skips, listed in ``tests/slow_tier.txt``;
and the seconds each test module took (``tests/module_seconds.txt``), by which the
parallel run hands out its heaviest modules first.

A test is in the tier when a full run measured it (setup, call and teardown together) at
``THRESHOLD`` seconds or more: mostly tests that start real processes (both services, the
CLI, a browser), whose start costs seconds of CPU each. Regenerate the list from a full
run's ``--durations=0`` report::

    pytest -n auto --durations=0 > durations.log
    python -m tests.slow_tier durations.log

Why the heaviest first: ``--dist loadfile`` hands whole modules to workers in collection
order, so a heavy module collected last ran alone at the end while the other workers
idled; handed out first, the light ones fill in around it (longest processing time first).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

LIST = Path(__file__).with_name("slow_tier.txt")
MODULES = Path(__file__).with_name("module_seconds.txt")
THRESHOLD = 5.0
# pytest's durations report: "12.34s call     tests/x/test_y.py::test_z[param]"
DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(\S.*)$")


@cache
def listed() -> frozenset[str]:
    """The node ids in the slow tier (none when the list is missing)."""
    if not LIST.exists():
        return frozenset()
    lines = (line.strip() for line in LIST.read_text().splitlines())
    return frozenset(line for line in lines if line and not line.startswith("#"))


@cache
def module_seconds() -> dict[str, float]:
    """Seconds per test module path as last measured (empty when the list is missing)."""
    if not MODULES.exists():
        return {}
    lines = (line for line in MODULES.read_text().splitlines() if not line.startswith("#"))
    rows = (line.split(maxsplit=1) for line in lines if line.strip())
    return {path: float(seconds) for seconds, path in rows}


def heaviest_first(paths: list[str]) -> list[str]:
    """``paths`` (module paths, in collection order) with the heaviest measured first;
    an unmeasured module keeps its place among the rest."""
    seconds = module_seconds()
    return sorted(paths, key=lambda path: -seconds.get(path, 0.0))


def measured(report: str) -> dict[str, float]:
    """Seconds per node id, setup, call and teardown summed, from a durations report."""
    totals: dict[str, float] = defaultdict(float)
    for line in report.splitlines():
        match = DURATION.match(line.strip())
        if match:
            totals[match.group(2).partition("@")[0]] += float(match.group(1))
    return dict(totals)


def main(report: Path) -> None:
    totals = measured(report.read_text())
    slow = sorted(node for node, seconds in totals.items() if seconds >= THRESHOLD)
    header = f"# tests measured at {THRESHOLD:g}s or more; regenerate: python -m tests.slow_tier"
    LIST.write_text("\n".join([header, *slow]) + "\n")
    modules: dict[str, float] = defaultdict(float)
    for node, seconds in totals.items():
        modules[node.partition("::")[0]] += seconds
    rows = [f"{seconds:.1f} {path}" for path, seconds in sorted(modules.items())]
    header = "# seconds per module in a full run; regenerate: python -m tests.slow_tier"
    MODULES.write_text("\n".join([header, *rows]) + "\n")
    print(f"{len(slow)} of {len(totals)} measured tests in the slow tier", file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
