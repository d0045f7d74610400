"""SQL with ``:name`` placeholders, put into the database driver's placeholder style.

Hot paths run fixed SQL on the driver's own cursor (building and compiling a Core
statement per call costs several times what SQLite takes to run it). That SQL is written
with ``:name`` placeholders and put into the driver's style once (:func:`styled`).
"""

from __future__ import annotations

import functools
import re

__all__ = ["styled"]

_NAMED_PLACEHOLDER = re.compile(r":([a-z_][a-z0-9_]*)", re.IGNORECASE)


@functools.lru_cache(maxsize=256)
def styled(paramstyle: str, sql: str) -> str:
    """``sql`` written with ``:name`` placeholders, in the driver's ``paramstyle``."""
    if paramstyle == "pyformat":  # psycopg
        return _NAMED_PLACEHOLDER.sub(r"%(\1)s", sql)
    return sql  # sqlite3 reads :name placeholders given a mapping, whatever it declares
