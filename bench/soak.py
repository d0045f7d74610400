"""``python -m bench.soak`` (``make soak``): 1,000 handoffs in flight at once, bounded.

remote_risk (pinned to core 0) holds every task for 1 s; this process (core 1) starts
``--handoffs`` governed handoffs at once through one coordinator client whose connection
pool is bounded (the client's default, 64 connections). The whole run is bounded by
``--limit`` seconds. Afterwards it checks that

* every handoff reached a terminal state and none is left in flight in the run store;
* none was lost or duplicated: each has exactly one remote task, no two share one, and
  the remote holds exactly one task per handoff (idempotency keys are unique);
* the audit ledger verifies;
* memory returned to its baseline: the coordinator's live Python objects are back within
  2% of what they were before the burst (resident sizes are reported alongside);
* the coordinator's SQLite WAL stayed bounded (sampled every 0.2 s; its largest size and
  the database's are reported, with remote_risk's alongside).

Exits 1 if any check fails. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import governed, procs, services
from coordinator.audit.ledger import verify
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.engine import (
    DATABASE_FILE,
    JOURNAL_SIZE_LIMIT,
    WAL_AUTOCHECKPOINT_PAGES,
)
from member_kit.storage.schema import tasks as task_table

OBJECT_TOLERANCE = 0.02
TASKS = task_table.name


def snapshot(server_pid: int) -> dict[str, int]:
    gc.collect()
    return {
        "objects": len(gc.get_objects()),
        "coordinator_rss": procs.rss_bytes(os.getpid()),
        "remote_rss": procs.rss_bytes(server_pid),
    }


class WalSampler:
    """The largest size each watched SQLite WAL reached, sampled in a thread."""

    def __init__(self, databases: dict[str, Path]) -> None:
        self.databases = databases
        self.largest = dict.fromkeys(databases, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> WalSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            for name, database in self.databases.items():
                wal = database.with_name(database.name + "-wal")
                size = wal.stat().st_size if wal.exists() else 0
                self.largest[name] = max(self.largest[name], size)

    def report(self) -> dict[str, dict[str, int]]:
        return {
            name: {
                "wal_largest": self.largest[name],
                "database": database.stat().st_size if database.exists() else 0,
            }
            for name, database in self.databases.items()
        }


def remote_tasks(data_dir: Path) -> tuple[int, int]:
    """(tasks held by the remote, idempotency keys held by more than one task)."""
    database = data_dir / services.DATABASE_FILE
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        total = connection.execute(f"SELECT count(*) FROM {TASKS}").fetchone()[0]
        duplicated = connection.execute(
            f"SELECT count(*) FROM (SELECT idempotency_key FROM {TASKS} "
            "WHERE idempotency_key IS NOT NULL GROUP BY idempotency_key HAVING count(*) > 1)"
        ).fetchone()[0]
    return int(total), int(duplicated)


async def burst(args: argparse.Namespace, risk: services.Running, root: Path) -> dict[str, Any]:
    ws = governed.workspace(root / "coordinator")
    keys = services.Issuer.keys_of(root)
    async with A2AClient() as client:
        agent = await governed.register(client, ws, risk.url, "remote-risk")
        await asyncio.gather(*(governed.handoff(client, agent, keys, ws) for _ in range(10)))
        before = snapshot(risk.process.pid)
        started = time.perf_counter()
        watched = {
            "coordinator": root / "coordinator" / DATABASE_FILE,
            "remote": (risk.data_dir or root) / services.DATABASE_FILE,
        }
        walls: list[float] = []

        async def timed() -> Any:
            begun = time.perf_counter()
            outcome = await governed.handoff(client, agent, keys, ws, timeout=args.lease)
            walls.append(time.perf_counter() - begun)
            return outcome

        with WalSampler(watched) as wal:
            work = [asyncio.ensure_future(timed()) for _ in range(args.handoffs)]
            done, pending = await asyncio.wait(work, timeout=args.limit)
        elapsed = time.perf_counter() - started
        for task in pending:
            task.cancel()
        outcomes = [task.result() for task in done if task.exception() is None]
        crashed = [repr(task.exception()) for task in done if task.exception() is not None]
    peak = {"remote_rss": procs.rss_bytes(risk.process.pid)}
    states = collections.Counter(outcome.record.state.value for outcome in outcomes)
    reasons = collections.Counter(
        f"{outcome.record.state.value}: {outcome.record.reason}" for outcome in outcomes
    )
    task_ids = [outcome.record.remote_task_id for outcome in outcomes]
    in_flight = ws.run_store().in_flight()
    report = verify(ws.engine())
    ws.close()
    del outcomes, work, done
    after = snapshot(risk.process.pid)
    total_tasks, duplicated_keys = remote_tasks(risk.data_dir or root)
    return {
        "handoffs": args.handoffs,
        "seconds": elapsed,
        "states": dict(states),
        "reasons": dict(reasons.most_common(5)),
        "unfinished": len(pending),
        "crashed": crashed[:3],
        "terminal": sum(states.values()),
        "in_flight": len(in_flight),
        "without_task": sum(1 for task_id in task_ids if task_id is None),
        "distinct_tasks": len({task_id for task_id in task_ids if task_id}),
        "remote_tasks": total_tasks - 10,
        "duplicated_keys": duplicated_keys,
        "ledger": str(report),
        "ledger_ok": report.ok,
        "before": before,
        "peak": peak,
        "wal": wal.report(),
        "after": after,
        "overhead_ms": overhead(walls, args.delay),
    }


def overhead(walls: list[float], remote_seconds: float) -> dict[str, float]:
    """Each handoff's time beyond the remote's own (its skill holds a task for
    ``remote_seconds``): median, p99 and largest, in milliseconds."""
    extra = sorted(max(0.0, wall - remote_seconds) * 1000 for wall in walls)
    if not extra:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}

    def at(quantile: float) -> float:
        return extra[min(len(extra) - 1, int(quantile * len(extra)))]

    return {"p50": at(0.5), "p99": at(0.99), "max": extra[-1]}


def checks(result: dict[str, Any]) -> list[tuple[str, bool]]:
    count = result["handoffs"]
    objects = result["before"]["objects"]
    wal_bound = JOURNAL_SIZE_LIMIT + WAL_AUTOCHECKPOINT_PAGES * 4096
    return [
        ("every handoff reached a terminal state", result["terminal"] == count),
        ("none left in flight in the run store", result["in_flight"] == 0),
        ("every handoff has its remote task", result["without_task"] == 0),
        ("no two handoffs share a remote task", result["distinct_tasks"] == count),
        ("the remote holds one task per handoff", result["remote_tasks"] == count),
        ("no idempotency key opened two tasks", result["duplicated_keys"] == 0),
        ("the audit ledger verifies", result["ledger_ok"]),
        (
            "coordinator objects back within 2% of baseline",
            result["after"]["objects"] <= objects * (1 + OBJECT_TOLERANCE),
        ),
        (
            "the coordinator's WAL stayed bounded",
            result["wal"]["coordinator"]["wal_largest"] <= wal_bound,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handoffs", type=int, default=1000)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per remote task")
    parser.add_argument("--lease", type=float, default=180.0, help="each handoff's deadline")
    parser.add_argument("--limit", type=float, default=240.0, help="bound on the whole burst")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {int(procs.LOAD_CORE)})
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        root = Path(tmp)
        issuer = services.Issuer.create(root)
        capacity = 2 * args.handoffs + 100
        with services.remote_risk(
            root, issuer, name="soak", delay=args.delay, capacity=capacity
        ) as risk:
            result = asyncio.run(burst(args, risk, root))
    mb = 1024 * 1024
    print(f"{args.handoffs} handoffs in {result['seconds']:.1f} s: {result['states']}")
    print(f"most common outcomes: {result['reasons']}")
    spent = result["overhead_ms"]
    print(
        f"overhead over the remote's own {args.delay:g} s per handoff: "
        f"p50 {spent['p50']:.0f} ms, p99 {spent['p99']:.0f} ms, largest {spent['max']:.0f} ms"
    )
    print(f"ledger: {result['ledger']}")
    for name, key in (("coordinator RSS", "coordinator_rss"), ("remote RSS", "remote_rss")):
        before, after = result["before"][key] / mb, result["after"][key] / mb
        print(f"{name}: {before:.1f} MB before, {after:.1f} MB after")
    print(f"remote RSS peak: {result['peak']['remote_rss'] / mb:.1f} MB")
    print(f"coordinator objects: {result['before']['objects']} -> {result['after']['objects']}")
    for name, sizes in result["wal"].items():
        print(
            f"{name} SQLite: WAL largest {sizes['wal_largest'] / mb:.1f} MB, "
            f"database {sizes['database'] / mb:.1f} MB"
        )
    failed = False
    for name, ok in checks(result):
        print(f"[{'ok' if ok else 'FAILED'}] {name}")
        failed = failed or not ok
    if result["crashed"]:
        print(f"exceptions: {result['crashed']}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
