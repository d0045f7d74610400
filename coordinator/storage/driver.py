"""Fixed statements run on the database driver's own cursor, for the hot write path.

A governed handoff writes a few rows and a few ledger events per step. Through
SQLAlchemy Core each statement costs about 90 us of Python before the database sees it,
several times what SQLite itself takes, so the handful of statements on that path run
here instead: plain ``INSERT`` / ``UPDATE`` / ``SELECT`` text built once per shape from
our own table and column names, executed on the driver connection of a SQLAlchemy
:class:`~sqlalchemy.Connection` inside the transaction that connection holds (so
``BEGIN IMMEDIATE``, the ledger's lock and the commit stay where they are). SQL is
written with ``:name`` placeholders and put into the driver's style once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from agent_cards.storage.driver import styled as _styled
from agent_cards.storage.held import thread_connection

_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def execute(connection: Connection, sql: str, params: Mapping[str, Any] | None = None) -> Any:
    """Run ``sql`` (``:name`` placeholders) on the driver; the driver's cursor."""
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cursor.execute(_styled(connection.dialect.paramstyle, sql), dict(params or {}))
    return cursor


def read_row(engine: Engine, sql: str, params: Mapping[str, Any]) -> Any:
    """The first row ``sql`` reads (or None), on the driver's cursor outside any
    transaction (one statement reads one consistent state). For a read on the event
    loop's thread, on its own connection on SQLite (:mod:`agent_cards.storage.held`): a
    SQLAlchemy statement costs more than SQLite takes to run it."""
    with thread_connection(engine) as connection:
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(_styled(engine.dialect.paramstyle, sql), dict(params))
        return cursor.fetchone()


def execute_many(connection: Connection, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cursor.executemany(_styled(connection.dialect.paramstyle, sql), rows)


def integrity_errors(engine: Engine) -> tuple[type[Exception], ...]:
    """What a broken constraint raises, through SQLAlchemy or straight from the driver."""
    return (IntegrityError, engine.dialect.dbapi.IntegrityError)  # type: ignore[union-attr]


def insert_sql(table: str, columns: Iterable[str]) -> str:
    names = tuple(columns)
    return _insert(table, names)


def update_sql(table: str, columns: Iterable[str], key: str) -> str:
    """``UPDATE table SET c = :c, ... WHERE key = :key`` (``key`` is not among the set)."""
    return _update(table, tuple(columns), key)


@functools.lru_cache(maxsize=256)
def _insert(table: str, columns: tuple[str, ...]) -> str:
    _check_names(table, *columns)
    placeholders = ", ".join(f":{name}" for name in columns)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})"


@functools.lru_cache(maxsize=256)
def _update(table: str, columns: tuple[str, ...], key: str) -> str:
    _check_names(table, key, *columns)
    assignments = ", ".join(f"{name} = :{name}" for name in columns)
    return f"UPDATE {table} SET {assignments} WHERE {key} = :{key}"


def _check_names(*names: str) -> None:
    """Statements are built from our own schema's names only; refuse anything else."""
    for name in names:
        if not _NAME.fullmatch(name):
            raise ValueError(f"not a plain SQL name: {name!r}")
