"""Measure the audit ledger on SQLite: append events/s and verify events/s.

Fills a fresh ledger in a temporary data directory with ``--events`` events (default
100,000), appended in batches through :meth:`Ledger.append_many`, then verifies the whole
ledger: chain, Merkle tree and kept tree heads. Each figure is the median of ``--runs``
runs (default 3). Part of figure (4) of ``make bench`` (:func:`measure`); also runs on its
own, not part of the tests::

    python -m bench.ledger_verify [--events N] [--runs R] [--batch B] [--strict] [--json]

So that "verification stays at least as fast" is measured on the same machine in the same
run, each run also times :func:`chain_only_walk`, the chain-only verification the ledger
had before the tree (SQLAlchemy rows, one ``json_extract`` per column, a per-event
loop), kept here as the baseline; the ratio is verify / chain-only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, and_, func, select

from contracts import strict_json
from contracts.canonical import canonical_json
from coordinator.audit.ledger import (
    CORRELATION_FIELDS,
    GENESIS_HASH,
    AuditEvent,
    Ledger,
    verify,
)
from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate
from coordinator.storage.schema import audit_events

_COMPARED = ("seq", "prev_hash", *CORRELATION_FIELDS)


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


class _ChainLinks:
    """Numbering and links, one method call per event, as the chain-only walk had it."""

    def __init__(self) -> None:
        self.last_seq, self.last_hash = 0, GENESIS_HASH

    def step(self, seq: int, prev_hash: str, digest: str) -> str | None:
        if seq != self.last_seq + 1:
            return "sequence"
        if prev_hash != self.last_hash:
            return "prev_mismatch"
        self.last_seq, self.last_hash = seq, digest
        return None


def _chain_rows(engine: Engine) -> Iterator[Any]:
    c = audit_events.c
    agree = and_(
        *(func.json_extract(c.canonical, f"$.{n}").is_not_distinct_from(c[n]) for n in _COMPARED)
    )
    query = select(c.seq, c.prev_hash, c.hash, c.canonical, agree).order_by(c.seq)
    with engine.connect() as connection:
        result = connection.execution_options(yield_per=5000).execute(query)
        try:
            yield from result
        finally:
            result.close()


def chain_only_walk(engine: Engine, strict: bool = False) -> int:
    """The verification of the chain alone as it was before the tree (the same query,
    generator and per-event loop): numbering, links, hashes and columns. Returns how many
    events it checked."""
    links, sha256 = _ChainLinks(), hashlib.sha256
    for seq, prev_hash, digest, canonical, agrees in _chain_rows(engine):
        broken = links.step(seq, prev_hash, digest)
        if broken is not None:
            raise SystemExit(f"chain-only walk: {broken} at {seq}")
        body = canonical.encode("utf-8")
        if sha256(body).hexdigest() != digest or not agrees:
            raise SystemExit(f"chain-only walk: broken event {seq}")
        if strict and canonical_json(strict_json.loads(body)) != body:
            raise SystemExit(f"chain-only walk: event {seq} is not canonical")
    return links.last_seq


def one_run(count: int, batch: int, strict: bool) -> tuple[float, float, float]:
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
        started = time.perf_counter()
        checked = chain_only_walk(engine, strict)
        chain_rate = count / (time.perf_counter() - started)
        engine.dispose()
    if not report.ok or report.checked != count or checked != count:
        raise SystemExit(f"verification failed: {report}")
    return append_rate, verify_rate, chain_rate


def measure(events: int, runs: int, batch: int = 500, strict: bool = False) -> dict[str, object]:
    """Batched append and verify rates of ``runs`` fresh ledgers of ``events`` events."""
    results = [one_run(events, batch, strict) for _ in range(runs)]
    return {
        "events": events,
        "append_per_s": [rate for rate, _, _ in results],
        "verify_per_s": [rate for _, rate, _ in results],
        "chain_only_per_s": [rate for _, _, rate in results],
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
    appends = statistics.median(rate for rate, _, _ in results)
    verifies = statistics.median(rate for _, rate, _ in results)
    chain = statistics.median(rate for _, _, rate in results)
    print(f"events: {args.events:,}, runs: {args.runs}, append batch: {args.batch}")
    print(f"append: {appends:,.0f} events/s (median)")
    print(f"verify{' --strict' if args.strict else ''}: {verifies:,.0f} events/s (median)")
    print(f"chain-only walk (before the tree): {chain:,.0f} events/s (median)")
    print(f"ratio verify / chain-only: {verifies / chain:.2f}")


if __name__ == "__main__":
    main()
