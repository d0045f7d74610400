"""Measure the audit ledger on SQLite: append events/s and verify events/s.

Fills a fresh ledger in a temporary data directory with ``--events`` events (default
100,000), appended in batches through :meth:`Ledger.append_many`, then verifies the whole
chain. Each figure is the median of ``--runs`` runs (default 3). Part of figure (4) of
``make bench`` (:func:`measure`); also runs on its own, not part of the tests::

    python -m bench.ledger_verify [--events N] [--runs R] [--batch B] [--strict] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Iterator

from coordinator.audit.ledger import AuditEvent, Ledger, verify
from coordinator.storage import migrate, open_engine


def sample_events(count: int) -> Iterator[AuditEvent]:
    kinds = ("message.dispatched", "remote.state_observed", "artifact.received")
    for index in range(count):
        yield AuditEvent(
            event_type=kinds[index % len(kinds)],
            actor="coordinator",
            run_id=f"run-{index // 50:08d}",
            handoff_id=f"handoff-{index // 5:08d}",
            attempt=1,
            remote_task_id=f"task-{index:08d}",
            trace_id=f"{index:032x}",
            data={"skill": "risk.assess", "target": "risk", "state": "WORKING", "n": index},
        )


def batches(count: int, size: int) -> Iterator[list[AuditEvent]]:
    events = sample_events(count)
    for start in range(0, count, size):
        yield [next(events) for _ in range(min(size, count - start))]


def one_run(count: int, batch: int, strict: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as root:
        engine = open_engine(root)
        migrate(engine)
        ledger = Ledger(engine)
        started = time.perf_counter()
        for events in batches(count, batch):
            ledger.append_many(events)
        append_rate = count / (time.perf_counter() - started)
        started = time.perf_counter()
        report = verify(engine, strict=strict)
        verify_rate = count / (time.perf_counter() - started)
        engine.dispose()
    if not report.ok or report.checked != count:
        raise SystemExit(f"verification failed: {report}")
    return append_rate, verify_rate


def measure(events: int, runs: int, batch: int = 500, strict: bool = False) -> dict[str, object]:
    """Batched append and verify rates of ``runs`` fresh ledgers of ``events`` events."""
    results = [one_run(events, batch, strict) for _ in range(runs)]
    return {
        "events": events,
        "append_per_s": [rate for rate, _ in results],
        "verify_per_s": [rate for _, rate in results],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--strict", action="store_true", help="re-run RFC 8785 on every row")
    parser.add_argument("--json", action="store_true", help="print one JSON line instead")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.events, args.runs, args.batch, args.strict)))
        return
    results = [one_run(args.events, args.batch, args.strict) for _ in range(args.runs)]
    appends = statistics.median(rate for rate, _ in results)
    verifies = statistics.median(rate for _, rate in results)
    print(f"events: {args.events:,}, runs: {args.runs}, append batch: {args.batch}")
    print(f"append: {appends:,.0f} events/s (median)")
    print(f"verify{' --strict' if args.strict else ''}: {verifies:,.0f} events/s (median)")


if __name__ == "__main__":
    main()
