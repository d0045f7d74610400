"""What ``federation evaluate`` prints: the rows, the distribution, and what they do not show."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from coordinator.assessment.model_gateway import ModelConfig


@dataclass(frozen=True)
class Row:
    configuration: str
    case: str
    run: int
    status: str
    sources: tuple[str, ...]
    private_note_absent: bool
    passed: bool
    elapsed_ms: float
    boundary_calls: int
    model_requests: int
    model_tokens: int | None
    reason: str | None


CAVEATS = (
    "What these figures show: each configuration reached the required status, cited the "
    "required sources and kept the private note out of what it returned, on these frozen "
    "cases; and what crossing a specialist boundary costs here (calls and local time).",
    "What they do not show: that a team of agents reasons better than one controller (the "
    "rules are the same functions in every configuration), how a live model behaves beyond "
    "the runs listed, or production latency. Times are one machine over loopback; a few "
    "milliseconds of difference is noise. The federation's cost is worth paying only if the "
    "organisational and data boundaries it keeps are real requirements.",
    "Model figures are every request made for the run: the coordinator's own and those "
    "remote_risk reported with its outcome (modelUsage metadata), which count against the "
    "run's request budget. The risk role uses REMOTE_RISK_MODEL_* in every configuration. "
    "Tokens a service did not report are unknown (null), never 0.",
)


def summary(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per configuration and case: runs, passes, statuses seen, elapsed median/min/max."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.configuration, row.case), []).append(row)
    return [
        {
            "configuration": configuration,
            "case": case,
            "runs": len(group),
            "passed": sum(row.passed for row in group),
            "statuses": dict(Counter(row.status for row in group)),
            "elapsed_ms_median": round(statistics.median(r.elapsed_ms for r in group), 1),
            "elapsed_ms_min": min(r.elapsed_ms for r in group),
            "elapsed_ms_max": max(r.elapsed_ms for r in group),
        }
        for (configuration, case), group in groups.items()
    ]


def document(rows: Sequence[Row], model: ModelConfig | None) -> dict[str, Any]:
    return {
        "model": model.describe() if model else None,
        "rows": [asdict(row) for row in rows],
        "summary": summary(rows),
        "all_passed": all(row.passed for row in rows),
        "notes": list(CAVEATS),
    }
