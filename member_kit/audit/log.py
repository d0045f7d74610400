"""The decision log as a transparency log: entries, an RFC 9162 Merkle tree, its heads.

Each entry is a JSON record ``{"seq", "recorded_at", "kind", "data"}`` (``kind``
``decision``: an authorization decision; ``receipt``: a receipt issued, carrying the
decision of the call it answers when that was waiting: see
:mod:`agent_cards.transparency.entries`). Its canonical
bytes are its RFC 8785 form; its hash their SHA-256; leaf ``seq - 1`` of the tree is
``SHA-256(0x00 || hash)``: the convention of the coordinator's ledger
(docs/audit-bundle.md), so the same proofs and verifiers serve both logs.

Appends are serialised by the database (``BEGIN IMMEDIATE`` on SQLite; on PostgreSQL a
transaction-level advisory lock per schema, taken before the next ``seq`` is read, so
replicas and threads queue for it instead of racing for the same ``seq``; the primary key
stays the last guard, its violation a retry), or by the process when kept in memory.
The root of the current tree is kept as a compact range and extended with the entries
appended since (by any replica), so stating the log (a receipt's size and root, or a
head signed for the audit routes) costs the new entries, not a pass over the log.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import Context, ContextVar
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Engine

from agent_cards.keys import SigningKey
from agent_cards.transparency import merkle
from agent_cards.transparency.entries import DECISION_ENTRY, DECISION_ON_RECEIPT, rides_on
from agent_cards.transparency.heads import Head, now_text, sign_head
from member_kit.audit.log_rows import Entry, MemoryRows, Row, Rows, SQLRows
from member_kit.storage.engine import commit_turn, driver_write, transaction_notes
from member_kit.storage.faults import is_storage_fault

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Later:
    """An entry written after the work at hand: its kind, data and handoff, and a key of
    its own, so that it is entered once however often it is written. ``tried``: a write
    of it failed and may yet have committed (its answer lost), so the next write looks
    for its key first."""

    kind: str
    data: dict[str, Any]
    handoff_id: str | None
    key: str
    tried: bool = False

    def again(self) -> Later:
        return replace(self, tried=True)


# At most this many decisions queued together are appended in one transaction.
MAX_LATER_BATCH = 64
# At most this many entries wait for the database to take writes again after a fault.
MAX_KEPT = 10_000


@dataclass(frozen=True)
class _Tentative:
    """A log stated inside a transaction not yet committed (a receipt's): the range it
    extended (None: decisions only, taken along a guarded send's claim), and the
    decisions written with it (to queue again if that transaction rolls back)."""

    ledger: DecisionLedger
    frontier: merkle.RootBuilder | None
    earlier: list[Later]


_tentative: ContextVar[list[_Tentative] | None] = ContextVar(
    "remote_risk_tentative_heads", default=None
)


def heads_after_commit() -> AbstractContextManager[None]:
    """Around a transaction that receipts join (a blocking send's one write): each log
    size and root stated inside (:meth:`DecisionLedger.append_covered`) extends its
    ledger's kept range only once the block has ended without an error, i.e. once that
    transaction has committed; on an error the entries are gone with the transaction,
    the kept range stays as it was, and the decisions written along are queued again."""
    return _HeadsAfterCommit()


class _HeadsAfterCommit:
    """:func:`heads_after_commit`'s block (a class: it is entered on every send)."""

    __slots__ = ("_taken", "_token")

    def __enter__(self) -> None:
        self._taken: list[_Tentative] = []
        self._token = _tentative.set(self._taken)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            if kind is not None:
                for tentative in self._taken:
                    tentative.ledger._requeue(tentative.earlier)
                return
        finally:
            _tentative.reset(self._token)
        for tentative in self._taken:
            if tentative.frontier is not None:
                tentative.ledger._adopt(tentative.frontier)


class DecisionLedger:
    """Append entries; sign heads; prove inclusion and consistency."""

    def __init__(self, engine: Engine | None = None) -> None:
        self._rows: Rows = SQLRows(engine) if engine is not None else MemoryRows()
        self._engine = engine
        self._frontier = merkle.RootBuilder()
        self._lock = threading.Lock()
        self._later: queue.Queue[Later] | None = None
        # On SQLite the service's writes stay on its event loop (member_kit.tasks.off_loop):
        # entries taken there wait in _pending for the loop's next turn, or for the next
        # receipt's transaction, whichever comes first.
        self._on_loop = engine is not None and engine.dialect.name == "sqlite"
        self._pending: list[Later] = []
        self._write_scheduled = False  # a loop turn will write what is pending
        self._pending_lock = threading.Lock()
        self._pending_write = threading.Lock()
        # each later entry's key: this ledger's random name and a count (no two alike)
        self._keys, self._count = f"{uuid.uuid4().hex[:16]}:", itertools.count(1)
        if engine is not None:
            self._later = queue.Queue()
            threading.Thread(target=self._write_later, name="decision-log", daemon=True).start()

    def append_later(self, kind: str, data: Mapping[str, Any], handoff_id: str | None) -> None:
        """Record an entry after the work at hand: a decision may be taken while the
        request's own transaction holds the database's write lock (a replayed token is
        refused inside the task's insert), and must not wait for it nor be undone with
        it. On SQLite, from the event loop, it is written on the loop's next turn (that
        transaction is over by then) or with the next receipt, many requests' entries in
        one transaction; elsewhere by a writer thread of its own. :meth:`flush` waits
        until every such entry is written."""
        if self._later is None:
            self.append(kind, data, handoff_id=handoff_id)
            return
        entry = Later(kind, dict(data), handoff_id, f"{kind}:{self._keys}{next(self._count)}")
        loop = _running_loop() if self._on_loop else None
        if loop is None:
            self._later.put(entry)
            return
        with self._pending_lock:
            self._pending.append(entry)
            schedule, self._write_scheduled = not self._write_scheduled, True
        if schedule:
            # not in the context of a transaction open now: the loop's turn comes after it
            loop.call_soon(self._write_pending, context=Context())

    def flush(self) -> None:
        if self._later is not None:
            self._write_pending()
            self._later.join()

    def _take_pending(self) -> list[Later]:
        with self._pending_lock:
            taken, self._pending = self._pending, []
        return taken

    def _write_pending(self) -> None:
        # a turn of the loop holding the database's write lock commits first: the thread
        # holding the lock below may be waiting for it (member_kit.storage.engine)
        commit_turn(self._engine)
        # held while writing, so that flush() from another thread waits for a write the
        # loop has already taken, not only for what is still pending
        with self._pending_write:
            with self._pending_lock:
                self._write_scheduled = False
            taken = self._take_pending()
            if taken:
                self._append_later(taken)

    def _write_later(self) -> None:
        """The decision-log thread: what is queued together is appended together (one
        transaction, so one turn at the database's write lock for many requests)."""
        assert self._later is not None
        while True:
            queued = [self._later.get()]
            while len(queued) < MAX_LATER_BATCH:
                try:
                    queued.append(self._later.get_nowait())
                except queue.Empty:
                    break
            try:  # any kept after a failed write go first
                self._append_later([*self._take_pending(), *queued])
            finally:
                for _ in queued:
                    self._later.task_done()

    def _append_later(self, taken: Sequence[Later]) -> None:
        try:
            self._rows.append_many(_records(taken), _tried(taken))
            return
        except Exception as error:
            if is_storage_fault(error):
                self._keep_for_next_write(taken)
                return
            if len(taken) == 1:
                logger.exception(
                    "a %s entry could not be written to the decision log", taken[0].kind
                )
                return
        for one in taken:  # one at a time, so one bad entry loses only itself
            self._append_later([one])

    def _keep_for_next_write(self, taken: Sequence[Later]) -> None:
        """Entries whose write the database failed: waiting again, ahead of those taken
        since, for the next write of the log (a receipt's, a claim's, the loop's next
        turn, the writer thread's next batch). Past :data:`MAX_KEPT` the oldest go."""
        logger.warning("the database failed a decision-log write; kept for the next one")
        with self._pending_lock:
            self._pending[:0] = [entry.again() for entry in taken]
            lost = len(self._pending) - MAX_KEPT
            if lost > 0:
                del self._pending[:lost]
        if lost > 0:
            logger.error("%d decision-log entries lost: more were waiting than kept", lost)

    def append(
        self,
        kind: str,
        data: Mapping[str, Any],
        *,
        key: str | None = None,
        handoff_id: str | None = None,
    ) -> bool:
        """Record one entry (once per ``key``, when given); False if ``key`` was recorded."""
        record = {"recorded_at": now_text(), "kind": kind, "data": dict(data)}
        return self._rows.append(record, key, handoff_id)

    def current(self) -> tuple[int, bytes]:
        """``(size, root)`` of the log now, extending the kept compact range."""
        with self._lock:
            fresh = self._rows.hashes(self._frontier.size)
            self._frontier.add([bytes.fromhex(digest) for digest in fresh])
            return self._frontier.size, self._frontier.root()

    def sign_head(self, key: SigningKey, issuer: str) -> Head:
        size, root = self.current()
        return sign_head(size, root, key, issuer)

    def append_covered(
        self,
        kind: str,
        data: Mapping[str, Any],
        *,
        key: str,
        handoff_id: str | None,
    ) -> tuple[int, bytes]:
        """:meth:`append` (once per ``key``), and ``(size, root)`` of the log covering the
        entry, in one transaction: a receipt's entry and the log it states take one
        write, and no signature of their own (the receipt states them). The kept range
        is extended only once that write is committed. The call allowed with the token
        the receipt binds, when its decision is waiting, rides on the receipt's entry
        (:mod:`agent_cards.transparency.entries`); entered alone if the receipt's key was
        recorded before. In a transaction other receipts extended the log in first (the
        sends of one turn), it builds on the range the last of them stated
        (:func:`~member_kit.storage.engine.transaction_notes`): a turn's receipts read
        back and hash each entry of the turn once, not once for every send after it."""
        tentative = _tentative.get()
        with self._lock:
            earlier = self._take_pending()  # decisions waiting for the loop: written here
            riding, alone = _riding(earlier, data, handoff_id)
            record = {"recorded_at": now_text(), "kind": kind, "data": _carrying(data, riding)}
            notes = self._notes() if tentative is not None else None
            base = self._frontier if notes is None else notes.get(self, self._frontier)
            try:
                fresh = self._rows.extend(
                    _records(alone),
                    (record, handoff_id, key),
                    base.size,
                    _tried(earlier),
                    unless_recorded=_records([riding] if riding else []),
                )
            except BaseException:
                self._requeue(earlier)  # not lost with the receipt: the writer thread's now
                raise
            # joined to a transaction still open (heads_after_commit): extend a copy
            frontier = self._frontier if tentative is None else _copy_of(base)
            frontier.add([bytes.fromhex(digest) for digest in fresh])
            size, root = frontier.size, frontier.root()
            if notes is not None:  # the next receipt in this transaction extends this one
                notes[self] = frontier
        if tentative is not None:
            tentative.append(_Tentative(self, frontier, earlier))
        return size, root

    def _notes(self) -> dict[object, Any] | None:
        """The notes of the write transaction open now (the sends of one turn share it),
        where this ledger keeps the range it extended in it; None outside one."""
        return transaction_notes(self._engine) if self._engine is not None else None

    def append_waiting(self) -> None:
        """Append the decisions waiting for the loop's next turn in the transaction open
        now, as :meth:`append_covered` does with a receipt: a guarded send's claim takes
        them along (:mod:`member_kit.guard.forward`), so they cost no commit of their own.
        Only inside :func:`heads_after_commit`, which queues them again if that
        transaction rolls back; a write of theirs that fails is undone alone (a
        savepoint) and queues them again at once, the transaction going on."""
        tentative = _tentative.get()
        if tentative is None or self._engine is None or not self._on_loop:
            return
        taken = self._take_pending()
        if not taken:
            return
        try:
            with driver_write(self._engine, savepoint=True):
                self._rows.append_many(_records(taken), _tried(taken))
        except Exception:
            logger.warning("decisions taken along a claim are queued again", exc_info=True)
            self._requeue(taken)
            return
        tentative.append(_Tentative(self, None, taken))

    def _requeue(self, earlier: Sequence[Later]) -> None:
        """Entries whose write failed, or went with a transaction that did, for the
        writer thread (looked for first: that write's outcome may be unknown)."""
        for entry in earlier:
            assert self._later is not None
            self._later.put(entry.again())

    def _adopt(self, frontier: merkle.RootBuilder) -> None:
        """Keep ``frontier``, extended in a transaction now committed, unless the kept
        range is already as long."""
        with self._lock:
            if frontier.size > self._frontier.size:
                self._frontier = frontier

    def tree(self, size: int) -> merkle.Tree:
        """The tree of the first ``size`` entries."""
        hashes = self._rows.hashes(0, size)
        if len(hashes) != size:
            raise ValueError(f"the log holds {len(hashes)} of {size} entries")
        return merkle.Tree(merkle.leaf_hash(bytes.fromhex(digest)) for digest in hashes)

    def of_handoff(self, handoff_id: str, size: int) -> list[Entry]:
        return [entry for entry in self._rows.of_handoff(handoff_id) if entry.seq <= size]

    def consistency(self, old_size: int, size: int) -> list[bytes]:
        return self.tree(size).consistency_proof(old_size)


def _copy_of(frontier: merkle.RootBuilder) -> merkle.RootBuilder:
    """A copy of ``frontier`` to extend without changing it (its stack is a short list)."""
    clone = merkle.RootBuilder()
    clone.size = frontier.size
    clone._stack = list(frontier._stack)
    return clone


def _records(taken: Sequence[Later]) -> list[Row]:
    return [
        (
            {"recorded_at": now_text(), "kind": entry.kind, "data": entry.data},
            entry.handoff_id,
            entry.key,
        )
        for entry in taken
    ]


def _riding(
    earlier: Sequence[Later], receipt: Mapping[str, Any], handoff_id: str | None
) -> tuple[Later | None, list[Later]]:
    """The decision waiting that rides on the entry of ``receipt`` (the call allowed with
    the token it binds, of its handoff, never one tried before: that may be entered
    already), and the entries written alone."""
    for index, entry in enumerate(earlier):
        if (
            entry.kind == DECISION_ENTRY
            and not entry.tried
            and entry.handoff_id == handoff_id
            and rides_on(entry.data, receipt)
        ):
            return entry, [*earlier[:index], *earlier[index + 1 :]]
    return None, list(earlier)


def _carrying(data: Mapping[str, Any], riding: Later | None) -> dict[str, Any]:
    """A receipt entry's data, with the decision riding on it."""
    return {**data, DECISION_ON_RECEIPT: riding.data} if riding else dict(data)


def _tried(taken: Sequence[Later]) -> frozenset[str]:
    """The keys to look for before writing ``taken``: those of entries tried before."""
    return frozenset(entry.key for entry in taken if entry.tried)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def entry_proofs(entries: Sequence[Entry], tree: merkle.Tree) -> list[dict[str, Any]]:
    """Each entry with its inclusion proof in ``tree`` (hex nodes)."""
    return [
        {
            "seq": entry.seq,
            "hash": entry.hash,
            "canonical": entry.canonical,
            "inclusion_proof": [node.hex() for node in tree.inclusion_proof(entry.seq - 1)],
        }
        for entry in entries
    ]
