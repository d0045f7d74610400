"""The durable side of runs: handoff records, what was sent, artifacts, units, grants.

The handoff book writes through to this store on every change (batched with the run's
audit events, see :class:`RunStore`), so a coordinator that dies keeps an exact account
of what was in flight. Several coordinator processes share
one database by taking a lease on each in-flight handoff: :meth:`RunStore.claim` picks
handoffs nobody drives (or whose driver's lease ran out) with ``FOR UPDATE SKIP LOCKED``
on PostgreSQL and under the single writer lock on SQLite, so each is driven by exactly
one process at a time.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine, and_, or_, select, update

from contracts import strict_json
from contracts.handoff import TERMINAL_STATES, HandoffRecord
from coordinator.errors import HandoffMovedOn, StorageError
from coordinator.storage import driver
from coordinator.storage.engine import write_transaction, writer_of
from coordinator.storage.run_rows import (
    RunRows,
    Step,
    Uncancelled,
    _insert,
    _json,
    _now,
    _update,
)
from coordinator.storage.schema import (
    artifacts,
    budget_units,
    grants,
    handoffs,
)

FINDING_CONTRACT = "finding"
T = TypeVar("T")
GENERIC_CONTRACT = "generic"
_TERMINAL = [state.value for state in TERMINAL_STATES]


def local_driver_id() -> str:
    """A driver id for this process: ``host:pid:nonce``, so a dead local driver is known."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def driver_is_dead_here(driver: str) -> bool:
    """True only for a driver of this host whose process no longer exists."""
    host, _, rest = driver.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


_ACCUMULATING = frozenset({"artifacts", "budget_units", "grants", "card_versions"})


def _stored_revision(connection: Connection, attempt_id: str) -> tuple[str, int] | None:
    """The stored row's ``(state, version)`` (locked on PostgreSQL until the commit), or
    None if the attempt has no row yet."""
    locked = connection.dialect.name == "postgresql"
    sql = _STORED_REVISION_SQL + (" FOR UPDATE" if locked else "")
    stored = driver.execute(connection, sql, {"attempt_id": attempt_id}).fetchone()
    return None if stored is None else (str(stored[0]), int(stored[1]))


def _supersedes(stored: tuple[str, int] | None, record: HandoffRecord) -> bool:
    """Whether ``record`` may replace the ``stored`` row's revision: another process (a
    cancel from the command line or the API) may have committed a newer revision, and an
    ended handoff stays ended. An older observation is not written (the driver reads the
    row and adopts it); an ending that lost raises :class:`HandoffMovedOn`, so nothing of
    it (the row or the events flushed with it) is written."""
    if stored is None:
        return True
    state, version = stored
    ended = state in _TERMINAL
    same = version == record.version and state == record.state.value
    if version <= record.version and (not ended or same):
        return True
    if record.terminal:
        raise HandoffMovedOn(f"handoff {record.attempt_id} is already {state} (version {version})")
    return False


# Built once, run on the driver's cursor (see coordinator.storage.driver): every durable
# point of a handoff reads its stored revision, and a driver its stored state.
_STORED_REVISION_SQL = f"SELECT state, version FROM {handoffs.name} WHERE attempt_id = :attempt_id"
_STORED_STATE_SQL = f"SELECT state FROM {handoffs.name} WHERE attempt_id = :attempt_id"


class Carrier(Protocol):
    """What writes a store's rows together with the facts they derive from (a run's
    audit trail, :class:`~coordinator.audit.trail.AuditTrail`)."""

    def flush(self) -> None: ...

    async def flush_durable(self) -> None: ...

    def release(self, store: RunStore) -> None: ...


class RunStore(RunRows):
    """Runs, handoffs and their accumulating facts in one database.

    Writes happen at once by default. A store whose writes a run's audit trail carries
    (:meth:`carried_by`, done by :class:`~coordinator.handoff.run.Run`) keeps them until the
    trail flushes, which writes them and the ledger events in one transaction; the
    dispatch path flushes before any message leaves, so what was sent is always on disk
    first. Every read and every lease operation flushes the trail before it runs, so a
    row never lands without the events it derives from.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._uncancelled = Uncancelled()
        self.deferred = False
        self._owner: int | None = None
        self._carrier: Carrier | None = None
        self._pending: list[Step] = []
        # Where each handoff's latest pending upsert sits, so a newer one replaces it.
        self._upserts: dict[str, int] = {}
        # What each pending handoff upsert writes besides the record (see save_payload).
        self._extras: dict[str, dict[str, Any]] = {}

    def carried_by(self, carrier: Carrier) -> None:
        """From now on writes wait for ``carrier``'s flush, which writes them with the
        facts they derive from; every flush of the store is the carrier's. A store follows
        one carrier: a second one taking it over first has the previous one land what it
        holds. Such a store belongs to the thread that deferred it (the event loop's):
        pending writes are not shared across threads."""
        previous = self._carrier
        if previous is not None and previous is not carrier:
            previous.flush()
            previous.release(self)
        self._carrier = carrier
        self.deferred = True
        self._owner = threading.get_ident()

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def write_pending(self, connection: Connection) -> None:
        """Apply the pending writes inside the caller's transaction."""
        for step in self.take_pending():
            step(connection)

    def take_pending(self) -> list[Step]:
        """The pending writes, taken out of the store (to be applied by whoever commits
        them, in order: the process's database writer, say)."""
        self._check_thread()
        steps, self._pending = self._pending, []
        self._upserts.clear()
        self._extras.clear()
        return steps

    def _check_thread(self) -> None:
        if self._owner is not None and threading.get_ident() != self._owner:
            raise StorageError(
                "a run store with deferred writes is used from another thread; give that "
                "thread a store of its own",
                "store_shared_across_threads",
            )

    def flush(self) -> None:
        """Write what is pending, through the process's database writer (so it lands in
        the order of every other write of this process); a carried store's rows go with
        the carrier's events."""
        if self._carrier is not None:
            self._carrier.flush()
        elif self._pending:
            steps = self.take_pending()
            writer_of(self.engine).call(lambda: self._commit(steps))

    async def flush_durable(self) -> None:
        """:meth:`flush` for a coroutine: the event loop goes on while it commits."""
        if self._carrier is not None:
            await self._carrier.flush_durable()
        elif self._pending:
            steps = self.take_pending()
            await writer_of(self.engine).run(lambda: self._commit(steps))

    def _in_writer(self, work: Callable[[Connection], T]) -> T:
        """``work`` in a write transaction of the process's database writer (waiting for
        it), so that no two writers of one process queue on the database's lock."""

        def run() -> T:
            with write_transaction(self.engine) as connection:
                return work(connection)

        return writer_of(self.engine).call(run)

    def _commit(self, steps: list[Step]) -> None:
        with write_transaction(self.engine) as connection:
            for step in steps:
                step(connection)

    def _write(self, step: Step) -> None:
        if self.deferred:
            self._check_thread()
            self._pending.append(step)
            return
        with write_transaction(self.engine) as connection:
            step(connection)

    # --- handoffs -------------------------------------------------------------------------

    def save_handoff(
        self, record: HandoffRecord, driver: str | None = None, lease_seconds: float = 0.0
    ) -> None:
        """Upsert the record; a process driving it keeps (and refreshes) its lease row.

        The record (frozen) is serialised when the write happens, so a pending version
        that a newer one supersedes costs nothing."""
        values: dict[str, Any] = {
            "state": record.state.value,
            "version": record.version,
            "remote_task_id": record.remote_task_id,
            "updated_at": _now(),
        }
        if driver is not None:
            values.update(driver=driver, driver_until=time.time() + lease_seconds)
        extra = self._extras.setdefault(record.attempt_id, {}) if self.deferred else {}

        def step(connection: Connection) -> None:
            stored = _stored_revision(connection, record.attempt_id)
            if not _supersedes(stored, record):
                if extra:
                    _update(connection, handoffs.name, "attempt_id", record.attempt_id, extra)
                return
            values.update(extra, record=record.model_dump_json())
            # a row the read did not find is inserted at once (no UPDATE that finds nothing)
            if stored is None or not _update(
                connection, handoffs.name, "attempt_id", record.attempt_id, values
            ):
                identity = {
                    "attempt_id": record.attempt_id,
                    "run_id": record.run_id,
                    "handoff_id": record.handoff_id,
                    "attempt": record.attempt,
                    "target": record.target,
                    "contract": GENERIC_CONTRACT,
                }
                _insert(connection, handoffs.name, {**identity, **values})

        self._superseding(record.attempt_id, step)

    def _superseding(self, key: str, step: Step) -> None:
        """Write ``step``; a pending write under the same ``key`` (a row's older version)
        is replaced by it, so a row changed many times between flushes is written once."""
        if self.deferred:
            at = self._upserts.get(key)
            if at is not None:
                self._pending[at] = step
                return
            self._upserts[key] = len(self._pending)
        self._write(step)

    def save_payload(self, record: HandoffRecord, payload: Any, contract: str) -> None:
        """What was (or will be) sent, so a restarted coordinator can resend it unchanged;
        written by the handoff row's pending upsert if there is one (just admitted)."""
        values = {"payload": _json(payload), "contract": contract}
        extra = self._extras.get(record.attempt_id) if self.deferred else None
        if extra is not None:
            self._check_thread()
            extra.update(values)
            return

        def step(connection: Connection) -> None:
            _update(connection, handoffs.name, "attempt_id", record.attempt_id, values)

        self._write(step)

    def handoff(self, attempt_id: str) -> tuple[HandoffRecord, Any, str] | None:
        self.flush()
        with self.engine.connect() as connection:
            row = connection.execute(
                select(handoffs.c.record, handoffs.c.payload, handoffs.c.contract).where(
                    handoffs.c.attempt_id == attempt_id
                )
            ).first()
        if row is None:
            return None
        payload = strict_json.loads(row.payload) if row.payload else None
        return HandoffRecord.model_validate_json(row.record), payload, row.contract

    def ended(self, attempt_id: str) -> bool:
        """Whether the handoff's stored row is in a terminal state: a cheap read that
        writes nothing pending first (a driver asks it while it follows a remote task)."""
        stored = driver.read_row(self.engine, _STORED_STATE_SQL, {"attempt_id": attempt_id})
        return stored is not None and stored[0] in _TERMINAL

    def refuse_if_ended(self, attempt_id: str) -> Step:
        """A step for a durable point's transaction that raises :class:`HandoffMovedOn`
        if the handoff's stored row has ended (another process cancelled it): the intent
        point runs it first, so a message whose handoff ended never leaves."""

        def refuse(connection: Connection) -> None:
            locked = connection.dialect.name == "postgresql"  # a cancel waits for this commit
            sql = _STORED_STATE_SQL + (" FOR UPDATE" if locked else "")
            cursor = driver.execute(connection, sql, {"attempt_id": attempt_id})
            stored = cursor.fetchone()
            if stored is not None and stored[0] in _TERMINAL:
                raise HandoffMovedOn(f"handoff {attempt_id} is already {stored[0]}")

        return refuse

    def run_records(self, run_id: str) -> list[HandoffRecord]:
        self.flush()
        with self.engine.connect() as connection:
            rows = connection.execute(select(handoffs.c.record).where(handoffs.c.run_id == run_id))
            return [HandoffRecord.model_validate_json(row.record) for row in rows]

    def in_flight(self) -> list[str]:
        self.flush()
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(handoffs.c.attempt_id).where(handoffs.c.state.not_in(_TERMINAL))
            )
            return [row.attempt_id for row in rows]

    # --- the driver lease -----------------------------------------------------------------

    def claim(
        self, driver: str, lease_seconds: float, limit: int = 50, skip: Collection[str] = ()
    ) -> list[str]:
        """Take up to ``limit`` in-flight handoffs that nobody drives or whose driver's
        lease ran out, except those in ``skip`` (what the caller drives already)."""
        self.flush()
        now = time.time()
        free = or_(handoffs.c.driver.is_(None), handoffs.c.driver_until < now)
        conditions = [handoffs.c.state.not_in(_TERMINAL), free]
        if skip:
            conditions.append(handoffs.c.attempt_id.not_in(list(skip)))
        query = (
            select(handoffs.c.attempt_id)
            .where(and_(*conditions))
            .order_by(handoffs.c.updated_at)
            .limit(limit)
        )

        def take(connection: Connection) -> list[str]:
            locked = query.with_for_update(skip_locked=True)
            chosen = locked if connection.dialect.name == "postgresql" else query
            claimed = [row.attempt_id for row in connection.execute(chosen)]
            if claimed:
                connection.execute(
                    update(handoffs)
                    .where(handoffs.c.attempt_id.in_(claimed))
                    .values(driver=driver, driver_until=now + lease_seconds)
                )
            return claimed

        return self._in_writer(take)

    def renew(self, driver: str, attempt_id: str, lease_seconds: float) -> bool:
        """Extend this driver's lease on the handoff of ``attempt_id``: on every attempt
        of it this driver holds, since a retry driven in the same drive is a row of its
        own (renewing the first attempt alone let a later one's lease run out under a
        long retry, and a second driver claim it). False if another process holds an
        attempt of it still in flight, or none is held here any more."""
        self.flush()
        c = handoffs.c
        handoff = select(c.handoff_id).where(c.attempt_id == attempt_id).scalar_subquery()
        taken = select(c.attempt_id).where(
            c.handoff_id == handoff,
            c.state.not_in(_TERMINAL),
            c.driver.is_not(None),
            c.driver != driver,
            c.driver_until >= time.time(),
        )
        statement = (
            update(handoffs)
            .where(c.handoff_id == handoff, c.driver == driver)
            .values(driver_until=time.time() + lease_seconds)
        )

        def renew(connection: Connection) -> bool:
            if connection.execute(taken.limit(1)).first() is not None:
                return False
            return bool(connection.execute(statement).rowcount)

        return self._in_writer(renew)

    def drivers(self) -> set[str]:
        """The drivers holding a lease on some in-flight handoff."""
        self.flush()
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(handoffs.c.driver)
                .where(handoffs.c.state.not_in(_TERMINAL), handoffs.c.driver.is_not(None))
                .distinct()
            )
            return {row.driver for row in rows}

    def release_driver(self, driver: str) -> int:
        """Free every lease ``driver`` holds (it is known to be dead)."""
        self.flush()
        statement = (
            update(handoffs)
            .where(handoffs.c.driver == driver)
            .values(driver=None, driver_until=None)
        )
        return int(self._in_writer(lambda c: c.execute(statement).rowcount))

    def release(self, driver: str, attempt_id: str) -> None:
        self.flush()
        statement = (
            update(handoffs)
            .where(handoffs.c.attempt_id == attempt_id, handoffs.c.driver == driver)
            .values(driver=None, driver_until=None)
        )
        self._in_writer(lambda c: c.execute(statement))

    # --- facts that only accumulate -------------------------------------------------------

    def add(self, table: str, values: Mapping[str, Any]) -> None:
        if table not in _ACCUMULATING:
            raise KeyError(table)
        row = dict(values)

        def step(connection: Connection) -> None:
            _insert(connection, table, row)

        self._write(step)

    def rows(self, table: str, run_id: str) -> list[dict[str, Any]]:
        self.flush()
        target = {"artifacts": artifacts, "budget_units": budget_units, "grants": grants}[table]
        with self.engine.connect() as connection:
            result = connection.execute(
                select(target).where(target.c.run_id == run_id).order_by(*target.primary_key)
            )
            return [row._asdict() for row in result]
