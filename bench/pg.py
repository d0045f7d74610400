"""A fresh PostgreSQL schema for one bench run (the test server on loopback, trust auth).

``FEDERATION_TEST_POSTGRES_URL`` names the server, as for the tests; the schema is made
for the run and dropped after it, so no run sees another's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

PG_URL = os.environ.get(
    "FEDERATION_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@contextmanager
def fresh_schema(prefix: str = "bench") -> Iterator[str | None]:
    """A database URL whose ``search_path`` is a new, empty schema; None when the server
    does not answer."""
    conninfo = make_url(PG_URL).set(drivername="postgresql").render_as_string(False)
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=3) as connection:
            connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    except psycopg.Error:
        yield None
        return
    try:
        url = make_url(PG_URL).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
