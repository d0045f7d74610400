"""Measure what the tree head in every delegation token costs, against signing one the
way ``audit prove`` does (verify the whole ledger first).

Fills a ledger of ``--events`` events (default 100,000), then times, median of
``--runs``: ``full`` = :func:`~coordinator.audit.proofs.sign_current_head` (a pass over
every event, then a signature); ``cold`` = the first :meth:`CurrentHead.latest` of a
process (the tree's compact range built from the stored hashes); ``warm`` = a later one
after ``--appended`` new events (default 20, about what one handoff records), the cost a
token pays; ``reused`` = a later one within the interval (the last head shown again).
Ratios are against ``full`` in the same run. Not part of the tests::

    python -m bench.token_head [--events N] [--runs R] [--appended A] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.ledger_verify import batches, sample_events
from coordinator.audit.ledger import Ledger
from coordinator.audit.log.current_head import CurrentHead
from coordinator.audit.proofs import sign_current_head
from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate


def one_run(count: int, appended: int) -> dict[str, float]:
    key = Ed25519PrivateKey.generate()
    with tempfile.TemporaryDirectory() as root:
        engine = open_engine(root)
        migrate(engine)
        ledger = Ledger(engine)
        for events in batches(count, 500):
            ledger.append_many(events)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        sign_current_head(ledger, key)
        timings["full"] = time.perf_counter() - started
        current = CurrentHead(engine, min_interval=0)
        started = time.perf_counter()
        current.latest(key, "coordinator")
        timings["cold"] = time.perf_counter() - started
        ledger.append_many(list(sample_events(appended)))
        started = time.perf_counter()
        current.latest(key, "coordinator")
        timings["warm"] = time.perf_counter() - started
        reusing = CurrentHead(engine, min_interval=3600)
        reusing.latest(key, "coordinator")
        ledger.append_many(list(sample_events(appended)))
        started = time.perf_counter()
        reusing.latest(key, "coordinator")
        timings["reused"] = time.perf_counter() - started
        engine.dispose()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--appended", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print one JSON line instead")
    args = parser.parse_args()
    runs = [one_run(args.events, args.appended) for _ in range(args.runs)]
    medians = {name: statistics.median(run[name] for run in runs) for name in runs[0]}
    if args.json:
        print(json.dumps({"events": args.events, **medians}))
        return
    print(f"events: {args.events:,}, runs: {args.runs}, appended before warm: {args.appended}")
    for name, seconds in medians.items():
        ratio = seconds / medians["full"]
        print(f"{name:>7}: {seconds * 1000:9.2f} ms  ({ratio:.4f} of full)")


if __name__ == "__main__":
    main()
