"""Tasks opened inside a store transaction, written once, in their final state, at its end.

A blocking send of an immediate skill opens its task, runs the skill and settles the task
within one transaction of :class:`~member_kit.tasks.sql.SQLTaskStore` (its
``transaction()``). Inserting the task SUBMITTED and then updating it (WORKING, then the
outcome) would write its row three times for a commit that shows only the last. So a task
created inside that transaction is kept here as :class:`Unwritten`: the record as every
change made to it there left it, the columns no change touches (its key and lease), and
how many status sequence numbers its moves took. Just before the commit the store takes
those numbers with one bump of the counter and inserts each row once, built then from
the record as it ended (:func:`sequenced`): its history, artifacts and status are
dumped to JSON once, not again at every change. Readers see exactly
what they saw before: nothing of the transaction until it commits, then the final row.
Inside the transaction the store reads such a task from here, not from the table; its
work lease is the one its insert names (this process's), so none is taken meanwhile.

Which store has a transaction open in the running context is kept here too
(:func:`opening`, :func:`opened_by`, :func:`unwritten_in`): a context variable, so a
send's transaction on the database writer thread is seen by every change it makes and
by no other. Pure bookkeeping, no I/O: the store runs the statements.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from member_kit.tasks.record import TaskRecord, as_it_is
from member_kit.tasks.sql_rows import row_values

Evicted = list[tuple[str, str]]
"""The ``(owner, id)`` of tasks evicted by one statement or transaction."""


@dataclass
class Unwritten:
    """A task opened in the open transaction and not yet inserted: ``record`` as it now
    is, with its sequence counted from 1 (:attr:`moves` is the last one taken), and
    ``fixed``, the parameters of its INSERT that are not the record's (its idempotency
    key and work lease)."""

    record: TaskRecord
    fixed: dict[str, Any]
    moves: int = 1

    def next_sequence(self, count: int) -> int:
        """The last of ``count`` more sequence numbers, counted within this task."""
        self.moves += count
        return self.moves

    def changed(self, record: TaskRecord) -> None:
        """The task is now ``record`` (a changed copy of the one kept)."""
        self.record = record

    def copy(self) -> TaskRecord:
        """A copy of the record to change (a failed change leaves this one as it was)."""
        return as_it_is(self.record)


@dataclass
class Opened:
    """What one open store transaction keeps until it commits: the tasks it evicted
    (announced after the commit) and the tasks it opened (written just before)."""

    evicted: Evicted = field(default_factory=list)
    unwritten: dict[str, Unwritten] = field(default_factory=dict)

    def total_moves(self) -> int:
        return sum(task.moves for task in self.unwritten.values())


def sequenced(opened: Opened, last: int) -> list[dict[str, Any]]:
    """The INSERT parameters of the opened tasks once ``last`` is the last of the
    :meth:`Opened.total_moves` sequence numbers taken for them; each task's record gets
    its final sequence (the last of its own block of numbers)."""
    rows = []
    end = last - opened.total_moves()
    for task in opened.unwritten.values():
        end += task.moves
        record = task.record
        record.sequence = end
        rows.append({"id": record.id, "owner": record.owner, **row_values(record), **task.fixed})
    return rows


# The store whose transaction() is open in this context, and what that transaction keeps.
_open_transaction: ContextVar[tuple[object, Opened] | None] = ContextVar(
    "remote_risk_open_transaction", default=None
)


def opening(store: object) -> AbstractContextManager[Opened]:
    """Mark ``store``'s transaction open in this context until the block ends; what it
    evicts and opens meanwhile is kept in the :class:`Opened` given."""
    return _Opening(store)


class _Opening:
    """:func:`opening`'s block (a class: it is entered on every send)."""

    __slots__ = ("_store", "_token")

    def __init__(self, store: object) -> None:
        self._store = store

    def __enter__(self) -> Opened:
        opened = Opened()
        self._token = _open_transaction.set((self._store, opened))
        return opened

    def __exit__(self, *_: object) -> None:
        _open_transaction.reset(self._token)


def opened_by(store: object) -> Opened | None:
    """``store``'s transaction open in this context, if there is one."""
    open_transaction = _open_transaction.get()
    if open_transaction is None or open_transaction[0] is not store:
        return None
    return open_transaction[1]


def unwritten_in(store: object, task_id: str | None) -> Unwritten | None:
    """The task ``task_id`` if ``store``'s open transaction opened it and has not
    written it yet."""
    opened = opened_by(store)
    if opened is None or task_id is None:
        return None
    return opened.unwritten.get(task_id)
