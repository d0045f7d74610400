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


def render(rows: Sequence[Row], model: ModelConfig | None) -> str:
    header: tuple[str, ...] = (
        *("configuration", "case", "run", "status", "sources", "private", "pass", "ms"),
        *("boundary", "requests", "tokens"),
    )
    table = [header] + [_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) for line in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    where = f"model {model.model}" if model else "offline: deterministic rules, no model"
    out = [f"federation evaluate ({where})", "", *lines, ""]
    if any(group["runs"] > 1 for group in summary(rows)):
        out.append("distribution per configuration and case:")
        for group in summary(rows):
            statuses = ", ".join(f"{k} x{v}" for k, v in group["statuses"].items())
            out.append(
                f"  {group['configuration']:<17} {group['case']:<8} passed "
                f"{group['passed']}/{group['runs']}  {statuses}  ms median "
                f"{group['elapsed_ms_median']} (min {group['elapsed_ms_min']}, max "
                f"{group['elapsed_ms_max']})"
            )
        out.append("")
    passed = sum(row.passed for row in rows)
    out.append(f"{passed}/{len(rows)} rows passed.")
    out.extend(f"\n{note}" for note in CAVEATS)
    return "\n".join(out)


def _cells(row: Row) -> tuple[str, ...]:
    reason = f" ({row.reason})" if row.reason else ""
    return (
        row.configuration,
        row.case,
        str(row.run),
        row.status + reason,
        ",".join(row.sources) or "-",
        "absent" if row.private_note_absent else "LEAKED",
        "yes" if row.passed else "NO",
        f"{row.elapsed_ms:.1f}",
        str(row.boundary_calls),
        str(row.model_requests),
        "unknown" if row.model_tokens is None else str(row.model_tokens),
    )
