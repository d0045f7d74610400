"""The runs table: a run's row (owner, kind, authority, document), written and read.

:class:`RunRows` is the part of :class:`~coordinator.storage.runs.RunStore` that keeps
runs. One rule lives here: a run once cancelled stays cancelled. Several processes write
a run's row (the one driving it, the one that cancels it from the command line or the
API); a driver's document written after another process cancelled the run, before the
driver noticed, keeps the stored cancellation, as an ended handoff stays ended.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, and_, or_, select

from contracts import strict_json
from coordinator.storage import driver
from coordinator.storage.schema import runs

Step = Callable[[Connection], None]
_STORED_DOCUMENT_SQL = f"SELECT document FROM {runs.name} WHERE run_id = :run_id"


def _insert(connection: Connection, table: str, row: Mapping[str, Any]) -> None:
    driver.execute(connection, driver.insert_sql(table, row), row)


def _update(
    connection: Connection, table: str, key: str, value: str, values: Mapping[str, Any]
) -> int:
    """Rows changed by setting ``values`` where ``key`` is ``value``."""
    sql = driver.update_sql(table, values, key)
    return int(driver.execute(connection, sql, {**values, key: value}).rowcount)


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _json(value: Any) -> str:
    return strict_json.dumps(value).decode()


def cancelled(document: Any) -> bool:
    """Whether ``document`` records its run's cancellation, with who and why."""
    return isinstance(document, Mapping) and bool(
        document.get("cancelled") and document.get("cancellation")
    )


def _stored_document(connection: Connection, run_id: str) -> str | None:
    """The stored row's document (its text), or None if the run has no row yet."""
    row = driver.execute(connection, _STORED_DOCUMENT_SQL, {"run_id": run_id}).fetchone()
    return None if row is None else str(row[0])


def _kept_cancellation(stored_text: str, document: Any) -> Any:
    """``document`` with the stored row's cancellation, if the stored row is cancelled and
    ``document`` is not; None if there is nothing to keep."""
    if not isinstance(document, Mapping):
        return None
    stored = strict_json.loads(stored_text)
    if not isinstance(stored, Mapping) or not stored.get("cancelled"):
        return None
    cancellation = document.get("cancellation") or stored.get("cancellation")
    return {**document, "cancelled": True, "cancellation": cancellation}


class Uncancelled:
    """The document text this store last wrote for each of its latest runs, each one
    known to hold no cancellation (it was written from a plain dict whose ``cancelled``
    is false): a stored text equal to it need not be parsed to know that. A run's
    document is the largest value a durable point reads; another process's write (a
    cancel) is another text, and is parsed. The statement "this text holds no
    cancellation" is true whatever became of the write, so a rolled-back one is harmless.
    """

    LIMIT = 64

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._lock = threading.Lock()

    def holds(self, run_id: str, text: str) -> bool:
        return self._texts.get(run_id) == text

    def note(self, run_id: str, text: str | None) -> None:
        """``text`` was written for ``run_id`` and holds no cancellation (None: the
        text written may hold one)."""
        with self._lock:
            self._texts.pop(run_id, None)
            if text is None:
                return
            self._texts[run_id] = text
            if len(self._texts) > self.LIMIT:
                del self._texts[next(iter(self._texts))]


def _uncancelled_text(document: Any, text: str) -> str | None:
    """``text`` (``document``'s JSON) if it certainly holds no cancellation."""
    return text if type(document) is dict and not document.get("cancelled") else None


class RunRows:
    """Runs' rows; the store's deferred writes and flush are :class:`RunStore`'s."""

    engine: Engine
    _uncancelled: Uncancelled

    def flush(self) -> None:
        raise NotImplementedError

    def _superseding(self, key: str, step: Step) -> None:
        raise NotImplementedError

    def save_run(
        self,
        run_id: str,
        owner: str,
        kind: str,
        authority: Mapping[str, Any],
        document: Any,
        *,
        deferred: bool = False,
    ) -> None:
        """Write the run's document now, with anything pending before it; ``deferred``
        lets it wait for the next flush like other writes (the run's first row). A run's
        kind and authority are fixed at its start: written with its first row, never
        again (a later save writes its owner, who may have changed, and document)."""
        text = _json(document)
        values = {"owner": owner, "document": text, "updated_at": _now()}
        known = self._uncancelled

        def step(connection: Connection) -> None:
            write(connection)
            written = values["document"]
            known.note(run_id, _uncancelled_text(document, text) if written is text else None)

        def write(connection: Connection) -> None:
            if not cancelled(document):
                # the read that keeps a cancellation also tells a new run's row from a
                # stored one: a new one is inserted at once (no UPDATE that finds nothing)
                stored = _stored_document(connection, run_id)
                if stored is None:
                    insert(connection)
                    return
                if not known.holds(run_id, stored):
                    kept = _kept_cancellation(stored, document)
                    values["document"] = values["document"] if kept is None else _json(kept)
            if not _update(connection, runs.name, "run_id", run_id, values):
                insert(connection)

        def insert(connection: Connection) -> None:
            row = {
                "run_id": run_id,
                "kind": kind,
                "authority": _json(authority),
                "created_at": values["updated_at"],
                **values,
            }
            _insert(connection, runs.name, row)

        self._superseding(f"run:{run_id}", step)
        if not deferred:
            self.flush()

    def run(self, run_id: str) -> dict[str, Any] | None:
        self.flush()
        with self.engine.connect() as connection:
            row = connection.execute(select(runs).where(runs.c.run_id == run_id)).first()
        if row is None:
            return None
        return {
            **row._asdict(),
            "document": strict_json.loads(row.document),
            "authority": strict_json.loads(row.authority),
        }

    def run_documents(self) -> list[dict[str, Any]]:
        self.flush()
        with self.engine.connect() as connection:
            rows = connection.execute(select(runs.c.document).order_by(runs.c.created_at))
            return [strict_json.loads(row.document) for row in rows]

    def run_page(
        self, limit: int, before: tuple[str, str] | None = None, since: str | None = None
    ) -> list[tuple[str, str, dict[str, Any]]]:
        """Up to ``limit`` runs, newest first, as ``(created_at, run_id, document)``:
        those created before the ``(created_at, run_id)`` key ``before`` (the last row of
        the previous page) and, with ``since``, not before that ISO 8601 time."""
        self.flush()
        query = select(runs.c.created_at, runs.c.run_id, runs.c.document)
        if before is not None:
            created, run_id = before
            query = query.where(
                or_(
                    runs.c.created_at < created,
                    and_(runs.c.created_at == created, runs.c.run_id < run_id),
                )
            )
        if since is not None:
            query = query.where(runs.c.created_at >= since)
        query = query.order_by(runs.c.created_at.desc(), runs.c.run_id.desc()).limit(limit)
        with self.engine.connect() as connection:
            rows = connection.execute(query).all()
        return [(row.created_at, row.run_id, strict_json.loads(row.document)) for row in rows]
