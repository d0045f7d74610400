"""Per-binding figures from A2A TCK compatibility reports (``make conformance``).

``python -m tests.tck_figures REPORT.json...`` prints, for each transport each report
covers, how many MUST and SHOULD requirements passed, failed and were skipped, and the
pass rate over those that ran. A requirement counts once per transport, as the kit's
``per_requirement[...]["transports"]`` records it; a requirement the kit marks FAIL is a
failure on a transport it records as PASS there (one of its tests passed, another not).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

LEVELS = ("MUST", "SHOULD")


def figures(report: dict[str, object]) -> dict[tuple[str, str], Counter[str]]:
    counts: dict[tuple[str, str], Counter[str]] = {}
    requirements = report.get("per_requirement", {})
    assert isinstance(requirements, dict)
    for requirement in requirements.values():
        level = requirement.get("level")
        failed = requirement.get("status") == "FAIL"
        for transport, status in requirement.get("transports", {}).items():
            if level in LEVELS:
                # one test of a requirement may pass on a transport and another fail
                judged = "FAIL" if failed and status == "PASS" else status
                counts.setdefault((transport, level), Counter())[judged] += 1
    return counts


def line(transport: str, level: str, count: Counter[str]) -> str:
    ran = count["PASS"] + count["FAIL"]
    rate = f"{100 * count['PASS'] / ran:.1f}%" if ran else "n/a"
    return (
        f"{transport:11} {level:6} {rate:>6}  passed {count['PASS']}, failed {count['FAIL']}, "
        f"skipped {sum(count.values()) - ran}"
    )


def main(paths: Sequence[str]) -> int:
    for path in paths:
        report = json.loads(Path(path).read_text())
        print(f"{path}: kit summary MUST {report['summary']['must_compatibility']}")
        for (transport, level), count in sorted(figures(report).items()):
            print("  " + line(transport, level, count))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
