"""What the tests of the member's turns (:func:`member_kit.storage.engine.in_turn`) share:
a member database of one table, ``items``, and a send's work that adds one row to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from member_kit.storage.engine import driver_write, open_engine


@contextmanager
def items_database(data_dir: Path, member: str) -> Iterator[Engine]:
    """``member``'s database in ``data_dir`` (``<member>.db``), holding ``items``."""
    engine = open_engine(data_dir=data_dir, member=member)
    with driver_write(engine) as cursor:
        cursor.execute("CREATE TABLE items (name TEXT PRIMARY KEY)")
    try:
        yield engine
    finally:
        engine.dispose()


def insert(engine: Engine, name: str, then: Callable[[], None] = lambda: None) -> Any:
    """A send's work: the row ``name``, then ``then()``; it returns ``name``."""

    def work() -> str:
        with driver_write(engine) as cursor:
            cursor.execute("INSERT INTO items (name) VALUES (?)", (name,))
        then()
        return name

    return work
