"""Telling a storage fault from a bug, recycling connections after one, and probing writes.

A storage fault is the database refusing or failing a statement for a reason of its
own: the file read-only or the disk full, an I/O error, the lock not granted in time, the
server gone or restarting, the pool exhausted. Such an error is worth retrying once the
database is back, and it is answered as 503 ``storage_unavailable`` with ``Retry-After``
(:mod:`coordinator.service.http.faults`). A broken constraint or bad SQL is not one: that is
a bug or a race, and retrying it changes nothing.

After a fault the pooled connections are recycled (:func:`recycle`): the next checkout
opens a fresh connection, so no connection that saw the fault (a SQLite handle after an
I/O error, a PostgreSQL connection whose server restarted) is used again. SQLAlchemy's
``handle_error`` hook does this for statements it runs (:func:`install_fault_handling`);
statements run on the driver's own cursor (:mod:`coordinator.storage.driver`), and the
``BEGIN``/``COMMIT`` of a durable point's transaction
(:func:`~agent_cards.storage.engine.driver_write_transaction`, which drops the connection
that saw the fault), reach the caller raw, and the caller recycles.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy import exc as sa_exc

from agent_cards.storage import faults as shared_faults
from agent_cards.storage.faults import RETRY_AFTER_SECONDS
from coordinator.errors import StorageError

__all__ = ["RETRY_AFTER_SECONDS", "install_fault_handling", "is_storage_fault", "recycle"]


def is_storage_fault(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is the database failing, not a bug: one of
    the shared faults (:mod:`agent_cards.storage.faults`), a connection SQLAlchemy saw
    invalidated, or a :class:`StorageError` with the default reason."""
    return shared_faults.is_storage_fault(error, _is_own_fault)


def _is_fault(error: BaseException) -> bool:
    return shared_faults.is_fault_type(error) or _is_own_fault(error)


def _is_own_fault(error: BaseException) -> bool:
    if isinstance(error, StorageError):
        return error.reason == StorageError.default_reason
    return isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated


def recycle(engine: Engine) -> None:
    """Drop every pooled connection; connections in use are closed when given back."""
    engine.dispose(close=True)


def install_fault_handling(engine: Engine) -> None:
    """Have SQLAlchemy treat a storage fault like a lost connection: the connection that
    saw it, and the rest of the pool, are replaced before they are used again."""
    event.listen(engine, "handle_error", _on_error)


def _on_error(context: Any) -> None:
    if not context.is_disconnect and _is_fault(context.original_exception):
        context.is_disconnect = True
        context.invalidate_pool_on_disconnect = True
