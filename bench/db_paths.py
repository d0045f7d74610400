"""How the event loop should reach the database: the options, measured side by side.

``python -m bench.db_paths`` runs the database work of one durable point of each service
from many coroutines of one event loop, each way in turn (rounds interleaved, ABCD ABCD
...), on SQLite and (when it answers) PostgreSQL, and prints transactions per second and
how late a 1 ms ticker on the same loop ran (the stall other requests would see):

* ``inline``: the synchronous call in the loop, as before (the baseline; it blocks);
* ``writer``: one writer thread per process fed by a queue (agent_cards/storage/writer.py),
  with group commit for the coordinator's points;
* ``to_thread``: ``asyncio.to_thread`` per transaction (the default thread pool);
* ``async``: SQLAlchemy asyncio (aiosqlite / psycopg async) running the same statements
  (only when aiosqlite is installed; the coordinator's shape).

The coordinator's point is four ledger events (``Ledger``, real code); remote_risk's is
its send's transaction (task insert and outcome, ``SQLTaskStore``, real code).
``DB_SECONDS`` (2), ``DB_ROUNDS`` (3), ``DB_LEVELS`` (1,8,32) shorten a run.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from agent_cards.storage.writer import Writer
from bench.pg import fresh_schema
from contracts.wire import Message, Part, Role, TaskState
from coordinator.audit.log.chain import Append, Ledger
from coordinator.audit.log.events import AuditEvent, seal
from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate
from member_kit.storage import engine as risk_engines
from member_kit.storage import migrations as risk_migrations
from member_kit.tasks.sql import SQLTaskStore

SECONDS = float(os.environ.get("DB_SECONDS", "2"))
ROUNDS = int(os.environ.get("DB_ROUNDS", "3"))
LEVELS = [int(x) for x in os.environ.get("DB_LEVELS", "1,8,32").split(",")]
Job = Callable[[], Awaitable[Any]]


def _events(n: int = 4) -> list[AuditEvent]:
    return [
        AuditEvent(event_type="bench.fact", actor="bench", data={"i": i, "note": "x" * 40},
                   run_id="run-bench", handoff_id="h", attempt=1)
        for i in range(n)
    ]  # fmt: skip


async def _drive(job: Job, concurrency: int, seconds: float) -> tuple[float, float, float]:
    """(transactions/s, p99 and max lateness of a 1 ms ticker in ms) for one window."""
    stop = time.perf_counter() + seconds
    done = 0
    lateness: list[float] = []

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await job()
            done += 1

    async def ticker() -> None:
        while time.perf_counter() < stop:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            lateness.append((time.perf_counter() - before - 0.001) * 1000)

    started = time.perf_counter()
    await asyncio.gather(ticker(), *(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    lateness.sort()
    p99 = lateness[int(len(lateness) * 0.99) - 1] if lateness else 0.0
    return done / elapsed, p99, lateness[-1] if lateness else 0.0


def coordinator_jobs(engine: Engine, url: str) -> dict[str, Job]:
    ledger = Ledger(engine)
    writer = Writer(name="bench-writer")

    async def inline() -> None:
        ledger.append_many(_events())

    async def threaded() -> None:
        records = [ledger.process(event) for event in _events()]
        await writer.commit(ledger.append_group, Append(records))

    async def to_thread() -> None:
        await asyncio.to_thread(ledger.append_many, _events())

    jobs: dict[str, Job] = {"inline": inline, "writer": threaded, "to_thread": to_thread}
    async_job = _async_job(ledger, url)
    if async_job is not None:
        jobs["async"] = async_job
    return jobs


def _async_job(ledger: Ledger, url: str) -> Job | None:
    """The same append through SQLAlchemy asyncio: BEGIN (IMMEDIATE on SQLite) or the
    advisory lock, the head, the inserts, the commit."""
    try:
        import aiosqlite  # noqa: F401  (bench-only: the measured alternative)
        from sqlalchemy import event, text
        from sqlalchemy.ext.asyncio import create_async_engine
    except ImportError:
        return None
    from coordinator.audit.log.chain import _HEAD_SQL, _INSERT_EVENT_SQL

    sqlite = url.startswith("sqlite")
    async_url = url.replace("sqlite+pysqlite", "sqlite+aiosqlite")
    engine = create_async_engine(async_url)
    if sqlite:

        @event.listens_for(engine.sync_engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    insert = text(_INSERT_EVENT_SQL)

    async def job() -> None:
        records = [ledger.process(e) for e in _events()]
        async with engine.begin() as connection:
            if not sqlite:
                await connection.execute(text("SELECT pg_advisory_xact_lock(1, 2)"))
            row = (await connection.execute(text(_HEAD_SQL))).first()
            seq, prev = (0, "0" * 64) if row is None else (int(row[0]), str(row[1]))
            rows = []
            for offset, record in enumerate(records, start=1):
                rows.append(seal(record, seq + offset, prev))
                prev = rows[-1]["hash"]
            await connection.execute(insert, rows)

    return job


def risk_jobs(engine: Engine) -> dict[str, Job]:
    store = SQLTaskStore(engine, capacity=1_000_000)
    writer = Writer(name="bench-risk-writer")
    reply = Message(message_id="m-reply", role=Role.AGENT, parts=[Part(text="done")])

    def send() -> None:
        message = Message(message_id=uuid.uuid4().hex, role=Role.USER, parts=[Part(text="hi")])
        with store.transaction():
            record = store.create("owner", message, idempotency_key=uuid.uuid4().hex)
            store.advance_through(record.id, TaskState.WORKING, TaskState.COMPLETED, reply)

    async def inline() -> None:
        send()

    async def threaded() -> None:
        await writer.run(send)

    async def to_thread() -> None:
        await asyncio.to_thread(send)

    return {"inline": inline, "writer": threaded, "to_thread": to_thread}


def measure(label: str, jobs: dict[str, Job]) -> list[str]:
    return asyncio.run(_measure(label, jobs))  # one loop: the async engine's pool is bound to it


async def _measure(label: str, jobs: dict[str, Job]) -> list[str]:
    lines = []
    for level in LEVELS:
        results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in jobs}
        for _ in range(ROUNDS):
            for name, job in jobs.items():  # interleaved: every option once per round
                results[name].append(await _drive(job, level, SECONDS))
        base = statistics.median(r[0] for r in results["inline"])
        for name, runs in results.items():
            rates = [r[0] for r in runs]
            median = statistics.median(rates)
            p99 = statistics.median(r[1] for r in runs)
            worst = max(r[2] for r in runs)
            spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
            lines.append(
                f"| {label} | {level} | {name} | {median:,.0f} | {spread}"
                f" | {median / base:.2f}x | {p99:.2f} | {worst:.1f} |"
            )
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    header = [
        "| service / database | c | option | tx/s (median) | min-max | vs inline | "
        "loop lateness p99 ms | worst ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    print("\n".join(header), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite+pysqlite:///{Path(tmp) / 'federation.db'}"
        engine = open_engine(sqlite_url)
        migrate(engine)
        measure("coordinator / SQLite", coordinator_jobs(engine, sqlite_url))
        risk_engine = risk_engines.open_engine(f"sqlite+pysqlite:///{Path(tmp) / 'risk.db'}")
        risk_migrations.migrate(risk_engine)
        measure("remote_risk / SQLite", risk_jobs(risk_engine))
    with fresh_schema() as pg_url:
        if pg_url is None:
            print("PostgreSQL does not answer: skipped", file=sys.stderr)
            return
        engine = open_engine(pg_url)
        migrate(engine)
        measure("coordinator / PostgreSQL", coordinator_jobs(engine, pg_url))
        risk_engine = risk_engines.open_engine(pg_url)
        risk_migrations.migrate(risk_engine)
        measure("remote_risk / PostgreSQL", risk_jobs(risk_engine))


if __name__ == "__main__":
    main()
