"""Figures, their statistics, and the results files (``results.json`` and ``results.md``)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Spread:
    """The median of several runs, with the smallest and largest."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("a spread needs at least one value")
        return cls(statistics.median(values), min(values), max(values))


@dataclass(frozen=True)
class Figure:
    """One line of the results: a value, its baseline, their ratio and the goal.

    ``ratio`` is ``value / baseline``. ``goal`` reads as ``">= 3"`` or ``"<= 1.5"`` and
    applies to ``goal_on`` (``"ratio"`` or ``"value"``); ``met`` is None without a goal.
    """

    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str | None = None
    ratio: float | None = None
    goal: str | None = None
    goal_on: str = "ratio"
    met: bool | None = None
    low: float | None = None
    high: float | None = None
    note: str = ""


def figure(
    name: str,
    value: Spread | float,
    unit: str,
    *,
    baseline: Spread | float | None = None,
    baseline_name: str | None = None,
    goal: str | None = None,
    goal_on: str = "ratio",
    note: str = "",
) -> Figure:
    measured = value if isinstance(value, Spread) else Spread(value, value, value)
    base = baseline.median if isinstance(baseline, Spread) else baseline
    ratio = measured.median / base if base else None
    judged = ratio if goal_on == "ratio" else measured.median
    return Figure(
        name=name,
        value=measured.median,
        unit=unit,
        baseline=base,
        baseline_name=baseline_name,
        ratio=ratio,
        goal=goal,
        goal_on=goal_on,
        met=_meets(judged, goal) if goal else None,
        low=measured.low,
        high=measured.high,
        note=note,
    )


def _meets(value: float | None, goal: str) -> bool | None:
    if value is None:
        return None
    operator, _, bound = goal.partition(" ")
    if operator == ">=":
        return value >= float(bound)
    if operator == "<=":
        return value <= float(bound)
    raise ValueError(f"a goal reads '>= N' or '<= N', not {goal!r}")


def machine() -> str:
    """One line naming the machine the figures were measured on."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = os.cpu_count() or 0
    pinning = "server on core 0, load on core 1" if shutil.which("taskset") else "no taskset"
    python = f"Python {sys.version.split()[0]}"
    load = _load_average()
    return f"{model}, {cores} cores, {platform.system()} {platform.release()}, {python}, " + (
        f"{pinning}, load average {load} at start"
    )


def _load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def write_results(directory: Path, machine_line: str, figures: Sequence[Figure]) -> None:
    document = {"machine": machine_line, "figures": [asdict(f) for f in figures]}
    (directory / "results.json").write_text(json.dumps(document, indent=2) + "\n")
    (directory / "results.md").write_text(markdown(machine_line, figures))


def markdown(machine_line: str, figures: Sequence[Figure]) -> str:
    lines = [
        f"Machine: {machine_line}",
        "",
        "| figure | value (median) | min-max | baseline | ratio | goal | met |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in figures:
        spread = f"{_num(f.low)}-{_num(f.high)}" if f.low != f.high else ""
        base = f"{_num(f.baseline)} ({f.baseline_name})" if f.baseline is not None else ""
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else ""
        goal = f"{f.goal_on} {f.goal}" if f.goal else ""
        met = {True: "yes", False: "**no**", None: ""}[f.met]
        name = f"{f.name} ({f.note})" if f.note else f.name
        lines.append(
            f"| {name} | {_num(f.value)} {f.unit} | {spread} | {base} | {ratio} | {goal} | {met} |"
        )
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    if value is None:
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
