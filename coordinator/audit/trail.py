"""The audit trail: every cross-service fact of a run, sent to the ledger as it happens.

:class:`AuditTrail` is what the handoff book, the dispatch path and the run call; it turns
a fact into an :class:`~coordinator.audit.ledger.AuditEvent` with the run, handoff, attempt,
actor, remote task id and trace id filled in. Without a ledger it keeps the events in
memory (a registry used without a database); a run always has one (see
:class:`~coordinator.handoff.run.Run`), and each fact is appended in a batch at the run's
durable points.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from contracts.handoff import HandoffRecord
from coordinator.audit.ledger import AuditEvent, Ledger
from coordinator.audit.log.chain import Append
from coordinator.storage.engine import writer_of
from coordinator.storage.runs import RunStore, Step
from coordinator.telemetry import metrics, tracing


@dataclass(frozen=True)
class Cause:
    """An event not yet recorded that moves a handoff: the move is recorded in it
    (``HandoffBook.commit``), or, if the move is refused, it is recorded alone."""

    event_type: str
    data: dict[str, object]


@dataclass(frozen=True)
class Held:
    """A fact held for the event that will record it: what that event takes into its
    ``data`` (``carried``; None: the fact is itself the event of the move it causes, see
    :meth:`AuditTrail.take_cause`), or, if none does, the event written alone (``alone``)."""

    alone: AuditEvent
    carried: Mapping[str, object] | None


def carried_by(held: list[Held]) -> dict[str, object]:
    """What the facts ``held`` add to the ``data`` of the event that carries them."""
    merged: dict[str, object] = {}
    for fact in held:
        merged.update(fact.carried or {})
    return merged


class AuditTrail:
    """Facts of a run on their way to the ledger.

    Events are gathered and appended in one transaction by :meth:`flush`, which the
    dispatch path calls before anything crosses to another service (and at the end of
    each step), so no fact about a message can be missing from the ledger once the
    message has left. Buffering turns a dozen single-event transactions per handoff into
    a few batched ones. A run store whose writes are deferred (:meth:`carry`) is written
    in that same transaction, so the run's rows and its facts land together.
    """

    FLUSH_AT = 64

    def __init__(self, ledger: Ledger | None = None, actor: str = "coordinator") -> None:
        self.ledger = ledger
        self.actor = actor
        self.kept: list[AuditEvent] = []
        self.pending: list[AuditEvent] = []
        # The stores it carries, held weakly: each store holds its carrier (to flush it
        # before a read), so holding them back would make a cycle.
        self._stores: list[weakref.ref[RunStore]] = []
        self._rows: list[Step] = []
        # Told of every event as it is emitted (``federation delegate`` reports by it).
        self.listener: Callable[[AuditEvent], None] | None = None
        # Called once, by the next flush, before it takes what is pending (a run adds its
        # state's row, and hooks itself again when its state changes again); a hook that
        # fails stays, with those after it, for the flush after.
        self.before_flush: list[Callable[[], None]] = []
        # attempt id -> facts held for the event that carries them (:meth:`hold`)
        self._held: dict[str, list[Held]] = {}

    def carry(self, store: RunStore) -> None:
        """Defer ``store``'s writes to this trail's flushes (when both share a database)."""
        if self.ledger is None or store.engine is not self.ledger.engine:
            return
        if store not in self._carried():
            store.carried_by(self)
            self._stores.append(weakref.ref(store))

    def release(self, store: RunStore) -> None:
        """Stop carrying ``store`` (another trail has taken it; see :meth:`carry`)."""
        self._stores = [ref for ref in self._stores if ref() not in (store, None)]

    def _carried(self) -> list[RunStore]:
        return [store for store in (ref() for ref in self._stores) if store is not None]

    def write_with(self, row: Step) -> None:
        """Write ``row`` (a function of the connection) in the next flush's transaction,
        before its events: what it records lands with them, and costs no commit of its
        own. Without a ledger there is no database, and nothing to write it to."""
        if self.ledger is not None:
            self._rows.append(row)

    def flush(self) -> None:
        """Write what is pending now (waiting, in the calling thread, for the commit)."""
        taken = self._take()
        if taken is not None:
            with _appending(taken):
                ledger = taken.ledger
                writer_of(ledger.engine).commit_now(ledger.append_group, taken.item, ledger.engine)

    async def flush_durable(self) -> None:
        """:meth:`flush` for a coroutine: the commit happens in the process's database
        writer, grouped with the durable points of other handoffs, and the event loop
        serves other requests meanwhile; returns once this point is on disk."""
        taken = self._take()
        if taken is not None:
            with _appending(taken):
                ledger = taken.ledger  # points of every trail on this database group
                await writer_of(ledger.engine).commit(
                    ledger.append_group, taken.item, ledger.engine
                )

    def _take(self) -> _Taken | None:
        """What is pending, taken out of the trail and the stores (in this thread)."""
        held, self._held = self._held, {}
        for facts in held.values():  # no event took them: alone
            self.write_alone(facts)
        if self.ledger is None:
            return None
        while self.before_flush:
            self.before_flush[0]()
            del self.before_flush[0]
        stores = [store for store in self._carried() if store.has_pending]
        if not self.pending and not stores and not self._rows:
            return None
        events, self.pending = self.pending, []
        steps, self._rows = self._rows, []
        steps += [step for store in stores for step in store.take_pending()]
        records = [self.ledger.process(event) for event in events]
        return _Taken(self.ledger, Append(records, _rows(steps) if steps else None))

    # --- facts held for the event that carries them -------------------------------------

    def hold(
        self,
        event_type: str,
        *,
        run_id: str,
        record: HandoffRecord,
        trace_id: str | None,
        data: Mapping[str, Any],
        carried: Mapping[str, object] | None,
    ) -> None:
        """Hold a fact of ``record``'s attempt for the event that records it: an admission
        or a grant for the dispatch that carries them (their ``carried`` members, taken by
        :meth:`take_held`), the remote state that moves the handoff for that move (no
        ``carried``: :meth:`take_cause`). One no event took is written alone, as
        ``event_type`` with ``data``, before any other event of that attempt and by the
        next flush: no fact waits past a durable point, none is written twice, and the
        order of an attempt's facts is kept."""
        alone = _event(event_type, self.actor, run_id, record, trace_id, data)
        self._held.setdefault(record.attempt_id, []).append(Held(alone, carried))

    def take_held(self, record: HandoffRecord) -> list[Held]:
        """The facts held for ``record``'s attempt that the event about to be recorded
        carries (:func:`carried_by`; if that event is not recorded after all,
        :meth:`write_alone`); a fact held as the cause of a move is written alone first."""
        held = self._held.pop(record.attempt_id, [])
        self.write_alone([fact for fact in held if fact.carried is None])
        return [fact for fact in held if fact.carried is not None]

    def take_cause(self, record: HandoffRecord) -> Cause | None:
        """The fact held as the cause of ``record``'s next move (the move records it, or,
        if the move is refused, it is recorded alone); any other fact held for the
        attempt is written alone first."""
        held = self._held.pop(record.attempt_id, [])
        cause = next((fact for fact in reversed(held) if fact.carried is None), None)
        self.write_alone([fact for fact in held if fact is not cause])
        return None if cause is None else Cause(cause.alone.event_type, dict(cause.alone.data))

    def write_alone(self, held: list[Held]) -> None:
        """Record each fact ``held`` as the event of its own it stands for."""
        for fact in held:
            self._append(fact.alone)

    def emit(
        self,
        event_type: str,
        *,
        run_id: str | None = None,
        record: HandoffRecord | None = None,
        trace_id: str | None = None,
        actor: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        if record is not None and record.attempt_id in self._held:
            self.write_alone(self._held.pop(record.attempt_id))  # they came first
        self._append(_event(event_type, actor or self.actor, run_id, record, trace_id, data))

    def _append(self, event: AuditEvent) -> None:
        if self.listener is not None:
            self.listener(event)
        if self.ledger is None:
            self.kept.append(event)
            return
        self.pending.append(event)
        if len(self.pending) >= self.FLUSH_AT:
            self.flush()


def _event(
    event_type: str,
    actor: str,
    run_id: str | None,
    record: HandoffRecord | None,
    trace_id: str | None,
    data: Mapping[str, Any] | None,
) -> AuditEvent:
    return AuditEvent(
        event_type=event_type,
        actor=actor,
        data=dict(data or {}),
        run_id=run_id or (record.run_id if record else None),
        handoff_id=record.handoff_id if record else None,
        attempt=record.attempt if record else None,
        remote_task_id=record.remote_task_id if record else None,
        trace_id=trace_id,
    )


class _Taken:
    __slots__ = ("item", "ledger")

    def __init__(self, ledger: Ledger, item: Append) -> None:
        self.ledger = ledger
        self.item = item


def _rows(steps: list[Step]) -> Callable[[Connection], None]:
    def write(connection: Connection) -> None:
        for step in steps:
            step(connection)

    return write


@contextmanager
def _appending(taken: _Taken) -> Iterator[None]:
    count = len(taken.item.records)
    attributes = {tracing.PREFIX + "events": count}
    with tracing.internal_span(tracing.PREFIX + "ledger.append", attributes):
        started = time.perf_counter()
        yield
        metrics.observe_ledger_append(count, started)


def contract_of(record: HandoffRecord) -> dict[str, Any]:
    """The handoff contract as recorded at admission (no events, no remote observations)."""
    return record.model_dump(
        mode="json",
        exclude={"events", "remote_task_id", "remote_state", "state", "version", "reason"},
    )
