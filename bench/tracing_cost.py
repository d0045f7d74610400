"""Figure (7): what tracing costs governed handoffs (issue 16), as paired measurements.

Two remote_risk processes run side by side for the whole figure, one with the
OpenTelemetry SDK disabled and one with tracing on but no exporter (the default); a
round drives governed handoffs at c=8 through a fresh coordinator process with the same
setting as its remote, once against each, and the round's figure is their ratio.

* (7): the two windows of a round one after the other, the order alternating (off-on,
  on-off, ...) so that drift falls on both sides alike;
* (7b): the two windows of a round at the same time (both coordinators on the load core,
  both remotes on the server core): both see the same machine at the same moment and
  the scheduler gives each the same CPU time, so their ratio is the inverse of their CPU
  cost per handoff, whatever else the machine does meanwhile.

The first rounds of each are warm-up and discarded; a figure is the median of the kept
rounds' on/off ratios, with their spread. ``BENCH_TRACING_ROUNDS`` (kept rounds of each,
default 8) and ``BENCH_TRACING_WARMUP_ROUNDS`` (default 1) set them; each window is
``BENCH_SECONDS`` long (the suite's timing).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import procs, services
from bench.stats import Figure, Spread, figure

# Tracing off: the SDK disabled in both processes; on: spans made (so ids join up and
# traceparent is sent) but no exporter configured, the default.
TRACING_OFF = {"OTEL_SDK_DISABLED": "true"}
TRACING_ON = {"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "none"}
SETTINGS = {"off": TRACING_OFF, "on": TRACING_ON}
GOAL = 0.95
SEQUENTIAL = "(7) governed handoffs with tracing on (no exporter), c=8"
TOGETHER = "(7b) governed handoffs with tracing on (no exporter), c=8, run beside tracing off"

Round = dict[str, float]


def figures(root: Path, issuer: services.Issuer, seconds: float, warmup: float) -> list[Figure]:
    rounds = int(os.environ.get("BENCH_TRACING_ROUNDS", "8"))
    discarded = int(os.environ.get("BENCH_TRACING_WARMUP_ROUNDS", "1"))
    with (
        services.remote_risk(root, issuer, name="tracing-off", env=TRACING_OFF) as off,
        services.remote_risk(root, issuer, name="tracing-on", env=TRACING_ON) as on,
    ):
        urls = {"off": off.url, "on": on.url}

        def rate(label: str) -> float:
            return _rate(urls[label], issuer, label, seconds, warmup)

        def alternating(number: int) -> Round:
            order = ("off", "on") if number % 2 == 0 else ("on", "off")
            return {label: rate(label) for label in order}

        def simultaneous(number: int) -> Round:
            with ThreadPoolExecutor(max_workers=2) as pool:
                running = {label: pool.submit(rate, label) for label in SETTINGS}
                return {label: done.result() for label, done in running.items()}

        sequential = _rounds("alternating", alternating, discarded, rounds)
        together = _rounds("simultaneous", simultaneous, discarded, rounds)
    warm = f"{discarded} warm-up round(s) discarded"
    return [
        _figure(SEQUENTIAL, sequential, f"one after the other, order alternating, {warm}"),
        _figure(TOGETHER, together, f"both at once, {warm}"),
    ]


def _rounds(kind: str, one: Callable[[int], Round], discarded: int, rounds: int) -> list[Round]:
    kept = []
    for number in range(discarded + rounds):
        rates = one(number)
        warm = number < discarded
        shown = ", ".join(f"{label} {value:.0f}/s" for label, value in rates.items())
        print(
            f"  {kind} round {number + 1}: {shown}{' (warm-up)' if warm else ''}", file=sys.stderr
        )
        if not warm:
            kept.append(rates)
    return kept


def _rate(url: str, issuer: services.Issuer, label: str, seconds: float, warmup: float) -> float:
    """Handoffs per second in one window, through a fresh coordinator process."""
    result: Any = procs.run_load(
        "bench.handoffs",
        "coordinator",
        url,
        "--concurrency",
        "8",
        "--keys",
        str(issuer.keys_dir),
        "--seconds",
        str(seconds),
        "--runs",
        "1",
        "--warmup",
        str(warmup),
        env=SETTINGS[label],
    )
    (window,) = result["runs"]
    if window["errors"]:
        raise RuntimeError(f"tracing {label}: failed handoffs in {window}")
    return float(window["rps"])


def _figure(name: str, paired: list[Round], how: str) -> Figure:
    ratios = [rates["on"] / rates["off"] for rates in paired]
    ratio = statistics.median(ratios)
    note = (
        f"median ratio of {len(paired)} paired rounds, {how}; "
        f"per-round ratio {min(ratios):.2f}-{max(ratios):.2f}"
    )
    shown = figure(
        name,
        Spread.of([rates["on"] for rates in paired]),
        "handoffs/s",
        baseline=Spread.of([rates["off"] for rates in paired]),
        baseline_name="tracing off (OTEL_SDK_DISABLED)",
        goal=f">= {GOAL}",
        note=note,
    )
    return dataclasses.replace(shown, ratio=ratio, met=ratio >= GOAL)
