"""Where the decision log's entries are kept: in memory (a member without a database) or in
the member's database, each entry sealed (its RFC 8785 text and SHA-256) with its ``seq``.

:mod:`member_kit.audit.log` builds the transparency log on these rows; here are only the
statements and their retries (another replica taking the same ``seq`` first).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from sqlalchemy import Engine, select

from contracts.canonical import canonical_json
from member_kit.storage.engine import (
    driver_errors,
    driver_read,
    driver_sql,
    driver_write,
    read_transaction,
)
from member_kit.storage.schema import audit_log

_APPEND_RETRIES = 5


@dataclass(frozen=True)
class Entry:
    seq: int
    hash: str
    canonical: str


class Rows(Protocol):
    """Where the entries are kept: :class:`MemoryRows` or :class:`SQLRows`."""

    def append(self, record: dict[str, Any], key: str | None, handoff_id: str | None) -> bool: ...

    def append_many(self, rows: Sequence[Row], look_up: Collection[str] = ()) -> None: ...

    def extend(
        self,
        earlier: Sequence[Row],
        receipt: Row,
        known: int,
        look_up: Collection[str] = (),
        unless_recorded: Sequence[Row] = (),
    ) -> list[str]: ...

    def hashes(self, after: int, up_to: int | None = None) -> list[str]: ...

    def of_handoff(self, handoff_id: str) -> list[Entry]: ...


# An entry record, its handoff and its key (an entry is written once per key). ``look_up``,
# where given: keys of entries whose earlier write may have committed, looked for first.
Row = tuple[dict[str, Any], str | None, str | None]


def sealed(record: dict[str, Any]) -> tuple[str, str]:
    """The canonical text and hash (hex) of an entry record."""
    canonical = canonical_json(record)
    return canonical.decode("utf-8"), hashlib.sha256(canonical).hexdigest()


class MemoryRows:
    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self._handoffs: list[str | None] = []
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any], key: str | None, handoff_id: str | None) -> bool:
        with self._lock:
            if key is not None and key in self._keys:
                return False
            canonical, digest = sealed({**record, "seq": len(self._entries) + 1})
            self._entries.append(Entry(len(self._entries) + 1, digest, canonical))
            self._handoffs.append(handoff_id)
            if key is not None:
                self._keys.add(key)
            return True

    def append_many(self, rows: Sequence[Row], look_up: Collection[str] = ()) -> None:
        for record, handoff_id, key in rows:  # a key recorded before is skipped anyway
            self.append(record, key, handoff_id)

    def extend(
        self,
        earlier: Sequence[Row],
        receipt: Row,
        known: int,
        look_up: Collection[str] = (),
        unless_recorded: Sequence[Row] = (),
    ) -> list[str]:
        self.append_many(earlier)
        record, handoff_id, key = receipt
        if not self.append(record, key, handoff_id):
            self.append_many(unless_recorded)
        return self.hashes(known)

    def hashes(self, after: int, up_to: int | None = None) -> list[str]:
        return [e.hash for e in self._entries[after:up_to]]

    def of_handoff(self, handoff_id: str) -> list[Entry]:
        return [e for e, h in zip(self._entries, self._handoffs, strict=True) if h == handoff_id]


# Fixed statements on the driver's own cursor (member_kit.storage.engine.driver_write):
# a receipt's entry is appended on the send's path, so it pays no SQLAlchemy compile.
_LOG = audit_log.name
_LAST_SEQ = f"SELECT max(seq) FROM {_LOG}"
_COLUMNS = ("seq", "hash", "canonical", "entry_key", "handoff_id")
# At most this many entries in one INSERT (five parameters each, far below any driver's limit).
_ROWS_PER_INSERT = 64
_HASHES_AFTER = f"SELECT hash FROM {_LOG} WHERE seq > :after ORDER BY seq"
_RECORDED_KEYS = f"SELECT entry_key FROM {_LOG} WHERE entry_key IN"
_KEYS_PER_LOOKUP = 500
# Arbitrary, fixed: the class half of PostgreSQL's two-key advisory lock for appends.
_APPEND_LOCK_CLASS = 0x52524C47
_LOCK = "SELECT pg_advisory_xact_lock(:cls, hashtext(current_schema()))"


class SQLRows:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._integrity = driver_errors(engine).IntegrityError
        self._locks = engine.dialect.name == "postgresql"

    def append(self, record: dict[str, Any], key: str | None, handoff_id: str | None) -> bool:
        for _ in range(_APPEND_RETRIES):
            try:
                # joined to an open transaction (a receipt and its head), a lost race is
                # undone alone on PostgreSQL, where it would spoil the whole transaction
                with driver_write(self._engine, savepoint=self._locks) as cursor:
                    self._lock(cursor)
                    _, _, written = self._insert_keyed(cursor, [(record, handoff_id, key)], ())
                return written == 1  # none: the key was recorded before
            except self._integrity:
                continue  # another replica took the seq (or the key) first: look again
        raise RuntimeError("the decision log could not be appended to")

    def append_many(self, rows: Sequence[Row], look_up: Collection[str] = ()) -> None:
        """Entries, consecutively, in one transaction (each once per key)."""
        for _ in range(_APPEND_RETRIES):
            try:
                with driver_write(self._engine) as cursor:
                    self._lock(cursor)
                    self._insert_keyed(cursor, rows, look_up)
                return
            except self._integrity:
                continue  # another replica took a seq first: look again
        raise RuntimeError("the decision log could not be appended to")

    def _lock(self, cursor: Any) -> None:
        """Queue for the log's end (held to the commit; SQLite holds its write lock)."""
        if self._locks:
            cursor.execute(self._sql(_LOCK), {"cls": _APPEND_LOCK_CLASS})

    def extend(
        self,
        earlier: Sequence[Row],
        receipt: Row,
        known: int,
        look_up: Collection[str] = (),
        unless_recorded: Sequence[Row] = (),
    ) -> list[str]:
        """``earlier``, then ``receipt`` once per its key, in one insert; the hashes of the
        entries after ``known``: those just written, unless another replica appended
        behind ``known`` (then read back). The receipt comes last, so when its key was
        recorded before, the insert skips it and leaves no gap in the ``seq``; then
        ``unless_recorded`` (what rode on it) is inserted after."""
        for _ in range(_APPEND_RETRIES):
            try:
                with driver_write(self._engine, savepoint=self._locks) as cursor:
                    self._lock(cursor)
                    rows = [*earlier, receipt]
                    last, digests, written = self._insert_keyed(cursor, rows, look_up)
                    if written < len(digests):  # the receipt's key was recorded before
                        digests.pop()
                        if unless_recorded:
                            digests += self._insert_keyed(cursor, unless_recorded, ())[1]
                    if last == known:
                        return digests
                    cursor.execute(self._sql(_HASHES_AFTER), {"after": known})
                    return [str(digest) for (digest,) in cursor.fetchall()]
            except self._integrity:
                continue  # another replica took a seq (or the key) first: look again
        raise RuntimeError("the decision log could not be appended to")

    def _insert_keyed(
        self, cursor: Any, records: Sequence[Row], look_up: Collection[str]
    ) -> tuple[int, list[str], int]:
        """Insert ``records`` after the last seq: that seq, the hashes of the records
        inserted and how many were written. An entry whose key is in ``look_up`` and
        recorded is left out before the seqs are counted; any other entry whose key is
        recorded is skipped by the insert, so only the last may have one, or seqs would
        be left out."""
        if look_up:
            records = self._not_recorded(cursor, records, look_up)
        cursor.execute(self._sql(_LAST_SEQ))
        (last,) = cursor.fetchone()
        last = int(last or 0)
        rows, digests = [], []
        for seq, (record, handoff_id, key) in zip(
            range(last + 1, last + 1 + len(records)), records, strict=True
        ):
            canonical, digest = sealed({**record, "seq": seq})
            digests.append(digest)
            rows.append(
                {"seq": seq, "hash": digest, "canonical": canonical,
                 "entry_key": key, "handoff_id": handoff_id}
            )  # fmt: skip
        written = 0
        for start in range(0, len(rows), _ROWS_PER_INSERT):
            batch = rows[start : start + _ROWS_PER_INSERT]
            cursor.execute(self._sql(insert_sql(len(batch))), numbered(batch))
            written += cursor.rowcount
        return last, digests, written

    def _not_recorded(
        self, cursor: Any, records: Sequence[Row], look_up: Collection[str]
    ) -> list[Row]:
        """``records`` but those whose key, one of ``look_up``, the log holds already: an
        entry written again after a write whose outcome was unknown (its answer lost)."""
        keys, found = sorted(look_up), set[str]()
        for start in range(0, len(keys), _KEYS_PER_LOOKUP):
            chunk = keys[start : start + _KEYS_PER_LOOKUP]
            names = ", ".join(f":key_{index}" for index in range(len(chunk)))
            cursor.execute(
                self._sql(f"{_RECORDED_KEYS} ({names})"),
                {f"key_{index}": key for index, key in enumerate(chunk)},
            )
            found.update(str(key) for (key,) in cursor.fetchall())
        return [row for row in records if row[2] not in found]

    def _sql(self, sql: str) -> str:
        return driver_sql(self._engine, sql)

    def hashes(self, after: int, up_to: int | None = None) -> list[str]:
        if up_to is None:  # the receipt's path: what was appended since the kept range
            with driver_read(self._engine) as cursor:
                cursor.execute(self._sql(_HASHES_AFTER), {"after": after})
                return [str(digest) for (digest,) in cursor.fetchall()]
        c = audit_log.c
        query = select(c.hash).where(c.seq > after, c.seq <= up_to).order_by(c.seq)
        with read_transaction(self._engine) as connection:
            return [str(digest) for (digest,) in connection.execute(query)]

    def of_handoff(self, handoff_id: str) -> list[Entry]:
        c = audit_log.c
        query = select(c.seq, c.hash, c.canonical).where(c.handoff_id == handoff_id)
        with read_transaction(self._engine) as connection:
            rows = connection.execute(query.order_by(c.seq)).all()
        return [Entry(int(seq), str(digest), str(body)) for seq, digest, body in rows]


@lru_cache(maxsize=_ROWS_PER_INSERT)
def insert_sql(count: int) -> str:
    """One INSERT of ``count`` entries (parameters ``seq_0``, ``hash_0``, ... as
    :func:`numbered` names them); an entry whose key is recorded is skipped."""
    values = ", ".join(
        "(" + ", ".join(f":{name}_{index}" for name in _COLUMNS) + ")" for index in range(count)
    )
    return (
        f"INSERT INTO {_LOG} ({', '.join(_COLUMNS)}) VALUES {values} "
        "ON CONFLICT (entry_key) DO NOTHING"
    )


def numbered(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of :func:`insert_sql` for ``rows``, under names spelled once per
    count of rows, not once per entry."""
    values = [row[name] for row in rows for name in _COLUMNS]
    return dict(zip(_parameter_names(len(rows)), values, strict=True))


@lru_cache(maxsize=_ROWS_PER_INSERT)
def _parameter_names(count: int) -> tuple[str, ...]:
    return tuple(f"{name}_{index}" for index in range(count) for name in _COLUMNS)
