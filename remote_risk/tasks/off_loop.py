"""A task store's transaction run off the event loop, by the process's database writer.

:meth:`remote_risk.tasks.sql.SQLTaskStore.run_transaction` hands the work of a send (its
task, the token's claim, the outcome) or of a lease round to one writer thread per
process (:mod:`agent_cards.edge.writer`), so a slow or locked database holds that work
only, never the event loop. Records the work settles are not signalled from the writer
thread (their ``settled`` event belongs to the loop): they are collected and signalled
on the loop once the work returns.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, TypeVar

from agent_cards.edge.writer import writer_of
from remote_risk.tasks.memory import TaskRecord, signal_settled

T = TypeVar("T")
WRITER_NAME = "remote-risk-db-writer"

# Records settled by run_off_loop() work in the writer thread, signalled on the loop after.
_deferred: ContextVar[list[TaskRecord] | None] = ContextVar(
    "remote_risk_deferred_signals", default=None
)


async def run_off_loop(
    engine: Any, transaction: Callable[[], AbstractContextManager[None]], work: Callable[[], T]
) -> T:
    """``work()`` inside ``transaction()``, in ``engine``'s writer thread; its result."""
    settled: list[TaskRecord] = []
    token = _deferred.set(settled)  # the writer runs in a copy of this context

    def in_transaction() -> T:
        with transaction():
            return work()

    try:
        return await writer_of(engine, WRITER_NAME).run(in_transaction)
    finally:
        _deferred.reset(token)
        for record in settled:
            signal_settled(record)


def signal_or_defer(record: TaskRecord) -> None:
    """:func:`signal_settled` now, or on the loop after the work, inside it."""
    deferred = _deferred.get()
    if deferred is None:
        signal_settled(record)
    else:
        deferred.append(record)
