"""The coordinator's CPU per governed handoff, of this checkout and of others, in one run.

The A/B of a change to the coordinator, as :mod:`bench.remote_cpu` is the member's. One
remote_risk (this checkout's, as ``make bench`` starts it) answers every window. A window
is one run of ``python -m bench.handoffs coordinator`` from one checkout, on the load
core: its warm-up, then ``seconds`` of handoffs at ``concurrency``, from which it reports
its own process's CPU per handoff (figure (2)'s ``cpu_ms``) and the remote's. Windows
alternate between the checkouts, ``rounds`` times, and each checkout's median window is
used, so that a busy machine shifts each alike.

``python -m bench.coordinator_cpu --also NAME=ROOT [--rounds 5] [--seconds 4]`` prints one
JSON line: each checkout's windows (coordinator and remote CPU ms a handoff, handoffs a
second, and the coordinator's context switches a handoff and durable points a commit:
what a change of its hand-overs between threads is read by, where CPU windows on a busy
machine are too noisy to) and their medians. ``--floor`` adds windows of the governed
floor against the member floor (figure 2f) in the same rounds: the distance still to go.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import procs, services

OURS = "this checkout"
FLOOR = "the floor"
# What each window reports, by its name in bench.handoffs' runs
FIGURES = {
    "cpu_ms": "coordinator_cpu_ms",
    "server_cpu_ms": "remote_cpu_ms",
    "rps": "handoffs_per_s",
    "errors": "failed",
    # read where the window reports them (a checkout from before they were, does not)
    "voluntary_switches": "voluntary_switches",
    "involuntary_switches": "involuntary_switches",
    "points_per_commit": "points_per_commit",
    "commits_in_place": "commits_in_place",
}


def window(
    checkout: Path, remote: services.Running, issuer: services.Issuer, args: argparse.Namespace
) -> dict[str, float]:
    """One window of handoffs driven by ``checkout``'s coordinator."""
    found = procs.run_load(
        "bench.handoffs",
        *("coordinator", remote.url, "--keys", str(issuer.keys_dir)),
        *("--concurrency", str(args.concurrency), "--seconds", str(args.seconds)),
        *("--warmup", str(args.warmup), "--runs", "1", "--server-pid", str(remote.process.pid)),
        checkout=checkout,
    )
    (run,) = found["runs"]
    return _figures(run)


def _figures(run: dict[str, Any]) -> dict[str, float]:
    return {name: float(run[key]) for key, name in FIGURES.items() if key in run}


def floor_window(
    floor: services.Running, issuer: services.Issuer, args: argparse.Namespace
) -> dict[str, float]:
    """One window of the governed floor against the member floor (figure 2f)."""
    found = procs.run_load(
        "bench.handoffs",
        *("floor", floor.url, "--keys", str(issuer.keys_dir)),
        *("--concurrency", str(args.concurrency), "--seconds", str(args.seconds)),
        *("--warmup", str(args.warmup), "--runs", "1", "--server-pid", str(floor.process.pid)),
    )
    (run,) = found["runs"]
    return _figures(run)


def measure(checkouts: dict[str, Path], args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-coordinator-cpu-") as tmp:
        root = Path(tmp)
        issuer = services.Issuer.create(root)
        with services.remote_risk(root, issuer) as remote, ExitStack() as stack:
            floor = stack.enter_context(services.floor(root, issuer)) if args.floor else None
            names = [*checkouts, *([FLOOR] if floor else [])]
            windows: dict[str, list[dict[str, float]]] = {name: [] for name in names}
            for _ in range(args.rounds):
                for name, checkout in checkouts.items():
                    windows[name].append(window(checkout, remote, issuer, args))
                if floor is not None:
                    windows[FLOOR].append(floor_window(floor, issuer, args))
    medians = {name: _medians(found) for name, found in windows.items()}
    return {"concurrency": args.concurrency, "windows": windows, "median": medians}


def _medians(found: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the windows that report it."""
    return {
        figure: statistics.median(read)
        for figure in FIGURES.values()
        if (read := [window[figure] for window in found if figure in window])
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0, help="each window's length")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before each window")
    parser.add_argument(
        "--also", action="append", default=[], metavar="NAME=ROOT", help="another checkout"
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also the governed floor against the member floor (bench.floor_governed)",
    )
    args = parser.parse_args(argv)
    checkouts = {OURS: procs.REPO}
    for entry in args.also:
        name, _, where = entry.partition("=")
        checkouts[name] = Path(where).resolve()
    print(json.dumps(measure(checkouts, args)), file=sys.stdout)


if __name__ == "__main__":
    main()
