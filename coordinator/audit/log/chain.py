"""The append-only chain: events appended in order, each linked to the one before.

Appends are serialised by the database: ``BEGIN IMMEDIATE`` on SQLite, a
transaction-level advisory lock on PostgreSQL. The primary key on ``seq`` makes a writer
that somehow raced anyway fail with ``chain_conflict`` instead of forking the chain. The
canonical bytes are stored with the event (column ``canonical``), so verification checks
an event with one SHA-256 (:mod:`coordinator.audit.log.verification`). The Merkle tree over
the events (:mod:`agent_cards.transparency.merkle`) is derived from the stored hashes, so an
append writes nothing more than it did before the tree existed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, select, text

from agent_cards.clock import utc_now
from coordinator.audit.log.events import (
    DEFAULT_PROCESSORS,
    GENESIS_HASH,
    AuditEvent,
    Processor,
    StoredEvent,
    check_record,
    prepared,
    seal,
    stored,
    timestamp,
)
from coordinator.errors import LedgerError
from coordinator.storage import driver
from coordinator.storage.engine import WouldWait, driver_write_transaction
from coordinator.storage.schema import audit_events

# Arbitrary, fixed: the class half of PostgreSQL's two-key advisory lock for appends.
_APPEND_LOCK_CLASS = 0x4C454447


def _lock_chain(connection: Connection) -> None:
    """Serialise appenders on PostgreSQL (SQLite already holds its write lock)."""
    if connection.dialect.name == "postgresql":
        connection.execute(
            text("SELECT pg_advisory_xact_lock(:cls, hashtext(current_schema()))"),
            {"cls": _APPEND_LOCK_CLASS},
        )


# Built once: constructing a statement costs more than running it on SQLite.
_HEAD_SQL = f"SELECT seq, hash FROM {audit_events.name} ORDER BY seq DESC LIMIT 1"
_INSERT_EVENT_SQL = driver.insert_sql(audit_events.name, (c.name for c in audit_events.columns))


def _head(connection: Connection) -> tuple[int, str]:
    row = driver.execute(connection, _HEAD_SQL).fetchone()
    return (0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))


@dataclass(frozen=True)
class Append:
    """One durable point on its way to the ledger: its event records (already processed,
    see :meth:`Ledger.process`) and the rows to write with them (``also``)."""

    records: Sequence[dict[str, Any]]
    also: Callable[[Connection], None] | None = None


class Ledger:
    """Append and read the audit ledger stored in ``engine``'s database."""

    def __init__(
        self,
        engine: Engine,
        *,
        processors: Sequence[Processor] = DEFAULT_PROCESSORS,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.engine = engine
        self._processors = tuple(processors)
        self._clock = clock

    def process(self, event: AuditEvent) -> dict[str, Any]:
        """The record of ``event`` as it will be sealed (processors applied, checked)."""
        return self._record(event)

    def _record(self, event: AuditEvent) -> dict[str, Any]:
        record: dict[str, Any] = {
            "event_type": event.event_type,
            "recorded_at": timestamp(event.recorded_at or self._clock()),
            "run_id": event.run_id,
            "handoff_id": event.handoff_id,
            "attempt": event.attempt,
            "actor": event.actor,
            "remote_task_id": event.remote_task_id,
            "trace_id": event.trace_id,
            "data": dict(event.data),
        }
        if self._processors == DEFAULT_PROCESSORS:
            record = prepared(record)  # redact_secrets, with the canonical text made once
        else:
            for processor in self._processors:
                record = processor(record)
        check_record(record)
        return record

    def append(self, event: AuditEvent) -> StoredEvent:
        """Record one event at the end of the chain."""
        return self.append_many([event])[0]

    def append_many(self, events: Iterable[AuditEvent]) -> list[StoredEvent]:
        """Record several events in one transaction: all of them, consecutively, or none."""
        rows = self._append(events, None)
        return [stored(row["canonical"], row["hash"]) for row in rows]

    def append_many_with(
        self, events: Iterable[AuditEvent], also: Callable[[Connection], None] | None = None
    ) -> int:
        """Append ``events`` with ``also`` written in the same transaction first (the run
        store's pending rows, say): the rows and the facts land together or not at all.
        Returns how many events were appended."""
        return len(self._append(events, also))

    def _append(
        self, events: Iterable[AuditEvent], also: Callable[[Connection], None] | None
    ) -> list[dict[str, Any]]:
        records = [self._record(event) for event in events]
        if not records and also is None:
            return []
        return self._write([Append(records, also)])

    def append_group(self, appends: Sequence[Append]) -> list[int | Exception]:
        """Group commit: several durable points (of concurrent handoffs) in one
        transaction, each appended after the one before; how many events each appended.
        If one of them fails, the group is rolled back and each is committed alone, so
        that one point's failure (a handoff that moved on, say) is that point's only."""
        try:
            return self._commit_group(appends)
        except WouldWait:
            raise  # nothing was written: the writer's thread takes the group
        except Exception as exc:
            if len(appends) == 1:
                return [exc]
        outcomes: list[int | Exception] = []
        for one in appends:
            try:
                outcomes.extend(self._commit_group([one]))
            except Exception as exc:
                outcomes.append(exc)
        return outcomes

    def _commit_group(self, appends: Sequence[Append]) -> list[int | Exception]:
        self._write(appends)
        return [len(one.records) for one in appends]

    def _write(self, appends: Sequence[Append]) -> list[dict[str, Any]]:
        """One transaction: each append's rows, then every record, sealed in order. It is
        a durable point's (of several, grouped), so it is begun and committed on the
        driver (:func:`~agent_cards.storage.engine.driver_write_transaction`)."""
        rows: list[dict[str, Any]] = []
        try:
            with driver_write_transaction(self.engine) as connection:
                for one in appends:
                    if one.also is not None:
                        one.also(connection)
                records = [record for one in appends for record in one.records]
                if records:
                    _lock_chain(connection)
                    seq, prev_hash = _head(connection)
                    for offset, record in enumerate(records, start=1):
                        rows.append(seal(record, seq + offset, prev_hash))
                        prev_hash = rows[-1]["hash"]
                    driver.execute_many(connection, _INSERT_EVENT_SQL, rows)
        except driver.integrity_errors(self.engine) as exc:
            raise LedgerError(
                "another writer took the same sequence number; nothing was appended",
                "chain_conflict",
            ) from exc
        return rows

    def events(self, run_id: str | None = None) -> list[StoredEvent]:
        """Every event in sequence order, or only those of one run."""
        query = select(audit_events.c.hash, audit_events.c.canonical)
        if run_id is not None:
            query = query.where(audit_events.c.run_id == run_id)
        with self.engine.connect() as connection:
            rows = connection.execute(query.order_by(audit_events.c.seq))
            return [stored(canonical, digest) for digest, canonical in rows]

    def head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the last event; ``(0, GENESIS_HASH)`` when empty."""
        with self.engine.connect() as connection:
            return _head(connection)

    def skeleton(self, up_to: int) -> list[tuple[int, str, str]]:
        """``(seq, prev_hash, hash)`` of every event up to ``up_to``."""
        c = audit_events.c
        query = select(c.seq, c.prev_hash, c.hash).where(c.seq <= up_to).order_by(c.seq)
        with self.engine.connect() as connection:
            return [(int(s), str(p), str(h)) for s, p, h in connection.execute(query)]

    def hashes(self, up_to: int) -> list[str]:
        """The ``hash`` of every event up to ``up_to``, in order: the tree's leaves."""
        c = audit_events.c
        query = select(c.hash).where(c.seq <= up_to).order_by(c.seq)
        with self.engine.connect() as connection:
            return [str(digest) for (digest,) in connection.execute(query)]

    def records(self, run_id: str, up_to: int) -> list[tuple[int, str, str]]:
        """``(seq, hash, canonical)`` of one run's events up to ``up_to``, in order."""
        c = audit_events.c
        query = (
            select(c.seq, c.hash, c.canonical)
            .where(c.run_id == run_id, c.seq <= up_to)
            .order_by(c.seq)
        )
        with self.engine.connect() as connection:
            return [(int(s), str(h), str(body)) for s, h, body in connection.execute(query)]
