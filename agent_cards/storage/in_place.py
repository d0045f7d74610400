"""Writing on the event loop's own thread without ever making it wait (SQLite).

A :class:`~agent_cards.storage.writer.Writer` may commit a turn's batch right where the
loop's turn ends (its "In place"). A transaction run there must not wait:

- not for another connection's write lock: ``BEGIN IMMEDIATE`` runs with no busy timeout
  and, if the lock is taken, raises :class:`WouldWait` having written nothing (the
  writer's thread then takes the batch and waits for the lock instead);
- not for the disk: its commit takes no automatic checkpoint (a copy of the WAL's pages
  into the database and two syncs). The writer's thread takes a passive one instead
  after every so many batches committed in place (:class:`InPlace`'s upkeep).

The connection's own busy timeout and checkpoint threshold are put back when the
transaction ends, so no other transaction of that connection behaves otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from agent_cards.storage.held import thread_connection

# Batches committed in place between two passive checkpoints on the writer's thread: at
# the coordinator's 18 to 65 pages a commit, about 1,200 to 4,200 pages of WAL.
UPKEEP_EVERY = 64


class WouldWait(Exception):
    """A batch run in place could not begin without waiting for the database; nothing of
    it was written, and the writer's thread takes its items."""


@dataclass(frozen=True)
class InPlace:
    """How a writer commits a batch on the loop's own thread: within ``begin()`` the batch
    raises :class:`WouldWait` rather than wait; ``upkeep`` (what the batch's commit did
    not do there) runs on the writer's thread after every ``upkeep_every`` of them."""

    begin: Callable[[], contextlib.AbstractContextManager[object]]
    upkeep: Callable[[], object] | None = None
    upkeep_every: int = UPKEEP_EVERY


_ASKED = threading.local()


@contextlib.contextmanager
def without_waiting() -> Iterator[None]:
    """In this thread, SQLite write transactions begun on the driver
    (:func:`~agent_cards.storage.engine.driver_write_transaction`) follow this module's
    rules: no wait for the lock, no checkpoint at the commit."""
    _ASKED.on = True
    try:
        yield
    finally:
        _ASKED.on = False


def asked() -> bool:
    """Whether this thread's write transactions are to follow this module's rules now."""
    return bool(getattr(_ASKED, "on", False))


def not_waiting(driver: Any) -> None:
    """The rules for the next transaction on ``driver``: no busy timeout, no checkpoint."""
    driver.execute("PRAGMA busy_timeout = 0")
    driver.execute("PRAGMA wal_autocheckpoint = 0")


def put_back(driver: Any, busy_ms: int, checkpoint_pages: int) -> None:
    """``driver``'s own rules again: its busy timeout and automatic checkpoint."""
    driver.execute(f"PRAGMA busy_timeout = {busy_ms}")
    driver.execute(f"PRAGMA wal_autocheckpoint = {checkpoint_pages}")


def begin(connection: Connection, driver: Any) -> None:
    """``BEGIN IMMEDIATE``, or :class:`WouldWait` if another connection holds the lock; a
    connection that failed otherwise is dropped."""
    try:
        driver.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode == sqlite3.SQLITE_BUSY and not driver.in_transaction:
            raise WouldWait(str(exc)) from None
        connection.invalidate()
        raise


def passive_checkpoint(engine: Engine) -> None:
    """Copy what the WAL holds into the database without waiting for anyone (what SQLite's
    automatic checkpoint does), on the calling thread's connection."""
    with thread_connection(engine) as connection:
        driver = connection.connection.driver_connection
        assert driver is not None
        driver.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def sqlite_in_place(engine: Engine) -> InPlace:
    """How a writer of ``engine``'s SQLite database commits in place."""
    return InPlace(without_waiting, functools.partial(passive_checkpoint, engine))
