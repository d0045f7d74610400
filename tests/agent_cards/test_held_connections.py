"""A thread's own SQLite connection (agent_cards.storage.held): kept from one of its
transactions to the next, never shared between threads, never kept once it failed or
was opened read-only, and closed when its engine is disposed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, event

from agent_cards.storage.engine import Database, driver_write_transaction
from agent_cards.storage.held import thread_connection
from agent_cards.storage.sqlite import opened_read_only


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    database = Database("held.db")
    engine = database.open(database.url_in(tmp_path))
    yield engine
    engine.dispose()


def _checkouts(engine: Engine) -> list[object]:
    seen: list[object] = []
    event.listen(engine, "checkout", lambda *args: seen.append(args[0]))
    return seen


def test_a_thread_keeps_its_connection_from_one_transaction_to_the_next(engine: Engine) -> None:
    checkouts = _checkouts(engine)
    with driver_write_transaction(engine) as connection:
        connection.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    for value in range(3):
        with driver_write_transaction(engine) as connection:
            connection.exec_driver_sql(f"INSERT INTO t VALUES ({value})")
    assert len(checkouts) == 1  # one connection for the four transactions
    with thread_connection(engine) as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM t").scalar() == 3


def test_each_thread_has_its_own(engine: Engine) -> None:
    used: dict[str, object] = {}

    def use(name: str) -> None:
        with thread_connection(engine) as connection:
            used[name] = connection.connection.driver_connection

    use("here")
    worker = threading.Thread(target=use, args=("there",))
    worker.start()
    worker.join()
    use("here again")
    assert used["here"] is used["here again"]
    assert used["here"] is not used["there"]


def test_a_connection_taken_inside_another_transaction_is_not_the_same(engine: Engine) -> None:
    """Nested in one thread (no transaction joins another here), the inner one gets a
    connection of its own; the thread keeps one of the two afterwards."""
    with thread_connection(engine) as outer, thread_connection(engine) as inner:
        assert outer is not inner
        assert outer.connection.driver_connection is not inner.connection.driver_connection
    checkouts = _checkouts(engine)
    with thread_connection(engine):
        pass
    assert checkouts == []


def test_a_failed_transaction_leaves_no_connection_behind(engine: Engine) -> None:
    """A storage fault drops the connection that saw it: the next transaction gets
    another one, not the broken one."""
    with thread_connection(engine) as connection:
        first = connection.connection.driver_connection
    with pytest.raises(RuntimeError), thread_connection(engine) as connection:
        connection.invalidate()
        raise RuntimeError("the fault")
    with thread_connection(engine) as connection:
        assert connection.connection.driver_connection is not first


def test_a_connection_opened_read_only_goes_back_to_the_pool(engine: Engine) -> None:
    with thread_connection(engine) as connection:
        pooled = connection.connection
        pooled.info["opened_read_only"] = True  # as the connect hook marks one
        assert opened_read_only(pooled)
        first = pooled.driver_connection
    with thread_connection(engine) as connection:
        # not kept: back in the pool, whose check replaced it (the file is writable)
        assert connection.connection.driver_connection is not first


def test_disposing_of_the_engine_closes_the_kept_connections(engine: Engine) -> None:
    with thread_connection(engine) as connection:
        kept = connection.connection.driver_connection
    assert kept is not None
    engine.dispose()
    with pytest.raises(Exception, match="closed"):
        kept.execute("SELECT 1")
    with thread_connection(engine) as connection:  # the engine goes on with a new one
        assert connection.exec_driver_sql("SELECT 1").scalar() == 1
        assert connection.connection.driver_connection is not kept


def test_a_connection_given_back_after_a_dispose_is_closed_not_kept(engine: Engine) -> None:
    with thread_connection(engine) as connection:
        taken = connection.connection.driver_connection
        engine.dispose()
    with thread_connection(engine) as connection:
        assert connection.connection.driver_connection is not taken
