"""Figure (9): governed handoffs on PostgreSQL, one coordinator process against two.

Each configuration gets a fresh PostgreSQL schema shared by its coordinator worker
processes (``bench.handoffs coordinator --database-url``, each with its own data
directory, keys and connection pool, as two `federation serve coordinator` processes
would be) and by its remote_risk replicas (``--database-url`` too; the coordinators take
the replicas in turn). Configurations, run in interleaved rounds: one worker and one
replica; two workers and one replica; two workers and two replicas. Each worker process
drives ``SCALE_CONCURRENCY`` (16) handoffs at a time; the figure is the sum of the
workers' rates (their windows start together). The replicas are pinned to the server
core as everywhere in the bench; the worker processes are not pinned: on a 2-core
machine the cores are the limit being measured. So each configuration also reports how
many of the machine's cores were busy during its windows, and its rate per busy core
beside the single process's: the cost of sharing the database with the cores set aside.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import procs, services
from bench.pg import fresh_schema
from bench.stats import Figure, Spread, figure

CONFIGURATIONS = ((1, 1), (2, 1), (2, 2))
CONCURRENCY = int(os.environ.get("SCALE_CONCURRENCY", "16"))
ROUNDS = int(os.environ.get("SCALE_ROUNDS", "2"))


def _loads(urls: list[str], database_url: str, workers: int, issuer: services.Issuer,
           timing_args: list[str]) -> list[dict[str, Any]]:  # fmt: skip
    """Run ``workers`` load processes at once against ``urls``; their JSON results."""
    command = procs.python(
        "bench.handoffs", "coordinator", ",".join(urls), "--database-url", database_url,
        "--concurrency", str(CONCURRENCY), "--keys", str(issuer.keys_dir), *timing_args,
    )  # fmt: skip
    running = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=procs.REPO)
        for _ in range(workers)
    ]
    results = []
    for process in running:
        out, err = process.communicate(timeout=600)
        if process.returncode != 0:
            raise RuntimeError(f"bench.handoffs failed:\n{err.decode()[-3000:]}")
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    return results


def _one(root: Path, issuer: services.Issuer, workers: int, replicas: int,
         timing_args: list[str], round_number: int) -> tuple[float, float, float]:  # fmt: skip
    """(summed handoffs/s over the windows' median, mean points per commit, mean busy
    cores of the machine during the windows)."""
    with fresh_schema("scale") as url, ExitStack() as stack:
        if url is None:
            raise RuntimeError("PostgreSQL does not answer")
        remotes = [
            stack.enter_context(services.remote_risk(
                root, issuer, name=f"scale-{workers}w{replicas}r-{round_number}-{n}",
                capacity=1_000_000, extra=("--database-url", url),
            ))
            for n in range(replicas)
        ]  # fmt: skip
        results = _loads([r.url for r in remotes], url, workers, issuer, timing_args)
    windows = zip(*(result["runs"] for result in results), strict=True)
    totals = [sum(run["rps"] for run in window) for window in windows]
    runs = [run for result in results for run in result["runs"]]
    batches = [run["points_per_commit"] for run in runs]
    busy = [run["busy_cores"] for run in runs]
    return statistics.median(totals), statistics.mean(batches), statistics.mean(busy)


def figures(root: Path, issuer: services.Issuer, timing_args: list[str]) -> list[Figure]:
    rates: dict[tuple[int, int], list[float]] = {c: [] for c in CONFIGURATIONS}
    batches: dict[tuple[int, int], list[float]] = {c: [] for c in CONFIGURATIONS}
    busy: dict[tuple[int, int], list[float]] = {c: [] for c in CONFIGURATIONS}
    for round_number in range(ROUNDS):
        for workers, replicas in CONFIGURATIONS:  # interleaved: each once per round
            rate, batch, cores = _one(root, issuer, workers, replicas, timing_args, round_number)
            rates[(workers, replicas)].append(rate)
            batches[(workers, replicas)].append(batch)
            busy[(workers, replicas)].append(cores)

    def load(configuration: tuple[int, int]) -> str:
        return (
            f"points per commit {statistics.mean(batches[configuration]):.2f}, "
            f"{statistics.mean(busy[configuration]):.2f} of {os.cpu_count()} cores busy"
        )

    one = Spread.of(rates[(1, 1)])
    found = [
        figure(
            f"(9) governed handoffs on PostgreSQL, 1 coordinator process, 1 remote_risk, "
            f"c={CONCURRENCY} ({load((1, 1))})",
            one,
            "handoffs/s",
        )
    ]

    def per_core(configuration: tuple[int, int]) -> Spread:
        pairs = zip(rates[configuration], busy[configuration], strict=True)
        return Spread.of([rate / cores for rate, cores in pairs if cores])

    for workers, replicas in CONFIGURATIONS[1:]:
        found.append(
            figure(
                f"(9) scale-out: {workers} coordinator processes, {replicas} remote_risk "
                f"replica{'s' if replicas > 1 else ''}, c={CONCURRENCY} each "
                f"({load((workers, replicas))})",
                Spread.of(rates[(workers, replicas)]),
                "handoffs/s",
                baseline=one,
                baseline_name="1 coordinator process",
                goal=">= 1.6",
            )
        )
        found.append(  # what sharing the database costs, the cores set aside
            figure(
                f"(9) the same per busy core: {workers} coordinator processes, {replicas} "
                f"remote_risk replica{'s' if replicas > 1 else ''}",
                per_core((workers, replicas)),
                "handoffs/s per busy core",
                baseline=per_core((1, 1)),
                baseline_name="1 coordinator process",
            )
        )
    return found
