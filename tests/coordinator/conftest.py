"""Database fixtures shared by the coordinator's storage tests.

``database_url`` is parametrized over the two backends: a SQLite file in ``tmp_path`` and
PostgreSQL in a freshly created schema (selected through ``search_path``) that is dropped
afterwards. PostgreSQL tests are skipped when the server cannot be reached, unless
``FEDERATION_REQUIRE_POSTGRES=1`` is set, in which case they fail.

The server defaults to the local test database and can be moved with
``FEDERATION_TEST_POSTGRES_URL``.

``offline_evaluation`` and ``throwaway_demo`` are CLI scenarios run once per session (see
:mod:`tests.scenarios`) for the tests that only read what they printed and recorded.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate
from tests.scenarios import Scenario, shared_cli_run

POSTGRES_URL = os.environ.get(
    "FEDERATION_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REQUIRE_POSTGRES = os.environ.get("FEDERATION_REQUIRE_POSTGRES") == "1"

EngineFactory = Callable[[], Engine]


def _libpq_conninfo(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The PostgreSQL URL, once it is known to answer; otherwise skip (or fail if required)."""
    try:
        with psycopg.connect(_libpq_conninfo(POSTGRES_URL), connect_timeout=3):
            pass
    except psycopg.Error as exc:
        message = f"PostgreSQL is not reachable ({type(exc).__name__}); set it up to run these"
        if REQUIRE_POSTGRES:
            pytest.fail(f"{message} (FEDERATION_REQUIRE_POSTGRES=1)")
        pytest.skip(message)
    return POSTGRES_URL


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A URL whose ``search_path`` is a new, empty schema, dropped after the test."""
    schema = f"ledger_test_{uuid.uuid4().hex[:12]}"
    conninfo = _libpq_conninfo(postgres_server)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = make_url(postgres_server).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database on each backend: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite+pysqlite:///{tmp_path / 'federation.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def engine_factory(database_url: str) -> Iterator[EngineFactory]:
    """Opens further engines on the same database (as separate processes would)."""
    engines: list[Engine] = []

    def open_another() -> Engine:
        engines.append(open_engine(database_url))
        return engines[-1]

    yield open_another
    for engine in engines:
        engine.dispose()


@pytest.fixture
def engine(engine_factory: EngineFactory) -> Engine:
    """A migrated engine on an empty database."""
    opened = engine_factory()
    migrate(opened)
    return opened


@pytest.fixture(scope="session")
def offline_evaluation(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """`federation evaluate --json`, offline, in a data directory of its own; read only."""
    return shared_cli_run(tmp_path_factory, "evaluate-offline", "evaluate", "--json")


@pytest.fixture(scope="session")
def throwaway_demo(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """`federation demo --case ok` given no data directory (it makes a throwaway one)."""
    return shared_cli_run(
        tmp_path_factory, "demo-ok-throwaway", "demo", "--case", "ok", data_dir=False
    )
