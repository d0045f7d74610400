"""The sends of one turn of the member's event loop share one transaction and its commit
(SQLite; :func:`member_kit.storage.engine.in_turn`).

Each send's work runs in a savepoint of the turn's transaction and is undone alone when
it fails; none returns before the shared commit; a storage fault ends the transaction
and fails every send in it; anything else that uses the database from the loop's thread
meanwhile has the turn commit first, so it neither waits for the turn's write lock nor
reads what is not committed. Real SQLite files, no mocks."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from member_kit.storage.engine import (
    MAX_SENDS_A_COMMIT,
    driver_read,
    in_turn,
)
from tests.remote_risk.turns import insert, items_database


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with items_database(tmp_path, "turns") as engine:
        yield engine


def traced(engine: Engine) -> list[str]:
    """Every statement of ``engine``'s connections from now on."""
    statements: list[str] = []
    engine.dispose()
    event.listen(
        engine, "connect", lambda connection, _: connection.set_trace_callback(statements.append)
    )
    return statements


def stored(path: Path) -> set[str]:
    """What another connection to the file sees: committed rows only."""
    with sqlite3.connect(path / "turns.db") as connection:
        return {row[0] for row in connection.execute("SELECT name FROM items")}


def fail(error: BaseException) -> Callable[[], None]:
    def raising() -> None:
        raise error

    return raising


def test_the_sends_of_one_turn_share_one_commit(engine: Engine, tmp_path: Path) -> None:
    """One commit; each send after the first in a savepoint of its own."""
    statements = traced(engine)

    async def sends() -> list[str]:
        return await asyncio.gather(*(in_turn(engine, insert(engine, n)) for n in "abc"))

    assert asyncio.run(sends()) == ["a", "b", "c"]
    assert statements.count("COMMIT") == 1
    assert sum(statement.startswith("SAVEPOINT") for statement in statements) == 2
    assert stored(tmp_path) == {"a", "b", "c"}


def test_a_full_transaction_commits_while_its_turn_goes_on(engine: Engine, tmp_path: Path) -> None:
    """A turn's transaction holds at most MAX_SENDS_A_COMMIT sends: the one that fills it
    commits it before the turn's next send begins, and the next ones share another."""
    statements = traced(engine)
    names = [f"s{i}" for i in range(MAX_SENDS_A_COMMIT + 2)]

    async def sends() -> list[str]:
        return await asyncio.gather(*(in_turn(engine, insert(engine, n)) for n in names))

    assert asyncio.run(sends()) == names
    first = statements.index("COMMIT")
    assert sum(s.startswith("INSERT") for s in statements[:first]) == MAX_SENDS_A_COMMIT
    assert statements.count("COMMIT") == 2
    assert stored(tmp_path) == set(names)


def test_a_lone_send_that_fails_leaves_nothing_and_the_next_turn_starts_afresh(
    engine: Engine, tmp_path: Path
) -> None:
    async def sends() -> None:
        with pytest.raises(ValueError):
            await in_turn(engine, insert(engine, "a", then=fail(ValueError("refused"))))
        assert await in_turn(engine, insert(engine, "b")) == "b"

    asyncio.run(sends())
    assert stored(tmp_path) == {"b"}


def test_a_send_returns_only_once_its_turn_is_committed(engine: Engine, tmp_path: Path) -> None:
    seen: list[set[str]] = []

    async def send() -> None:
        await in_turn(engine, insert(engine, "a", then=lambda: seen.append(stored(tmp_path))))
        seen.append(stored(tmp_path))

    asyncio.run(send())
    assert seen == [set(), {"a"}]  # not visible while its work ran; committed when it returned


def test_a_send_that_fails_is_undone_alone(engine: Engine, tmp_path: Path) -> None:
    async def sends() -> list[Any]:
        return await asyncio.gather(
            in_turn(engine, insert(engine, "a")),
            in_turn(engine, insert(engine, "b", then=fail(ValueError("refused")))),
            in_turn(engine, insert(engine, "c")),
            return_exceptions=True,
        )

    first, refused, third = asyncio.run(sends())
    assert (first, third) == ("a", "c")
    assert isinstance(refused, ValueError)
    assert stored(tmp_path) == {"a", "c"}


def test_a_storage_fault_fails_every_send_of_its_turn(engine: Engine, tmp_path: Path) -> None:
    """The fault ends the shared transaction: the send before it is lost with it, so it is
    told so (it never answers as if stored); the next turn starts afresh."""
    fault = sqlite3.OperationalError("disk I/O error")

    async def sends() -> list[Any]:
        return await asyncio.gather(
            in_turn(engine, insert(engine, "a")),
            in_turn(engine, insert(engine, "b", then=fail(fault))),
            return_exceptions=True,
        )

    assert asyncio.run(sends()) == [fault, fault]
    assert stored(tmp_path) == set()
    assert asyncio.run(in_turn(engine, insert(engine, "c"))) == "c"
    assert stored(tmp_path) == {"c"}


def test_a_read_on_the_loop_meanwhile_commits_the_turn_first(
    engine: Engine, tmp_path: Path
) -> None:
    """A read made on the loop's thread while a turn is open (another request's) neither
    waits for the turn nor reads what is not committed: the turn commits first."""

    async def send_then_read() -> tuple[set[str], set[str]]:
        sent = asyncio.ensure_future(in_turn(engine, insert(engine, "a")))
        await asyncio.sleep(0)  # the send's work runs; its turn is open
        before = stored(tmp_path)
        with driver_read(engine) as cursor:
            read = {row[0] for row in cursor.execute("SELECT name FROM items")}
        await sent
        return before, read

    before, read = asyncio.run(send_then_read())
    assert (before, read) == (set(), {"a"})


def test_each_thread_s_loop_has_a_turn_of_its_own(engine: Engine, tmp_path: Path) -> None:
    """Two event loops on two threads sharing one engine: a send on the second, made
    while the first holds its turn open, opens its own turn on its own thread's
    connection (waiting for the database's write lock), never joins the other's."""
    second_started = threading.Event()

    def first_work() -> None:
        assert second_started.wait(5)
        time.sleep(0.05)  # the first turn still open while the second send looks for one

    def second() -> str:
        second_started.set()
        return asyncio.run(in_turn(engine, insert(engine, "b")))

    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(asyncio.run, in_turn(engine, insert(engine, "a", then=first_work)))
        assert second() == "b"
        assert first.result(5) == "a"
    assert stored(tmp_path) == {"a", "b"}
