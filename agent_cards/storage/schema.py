"""What both services' table definitions share: the names constraints and indexes get,
and the type of a sequence number that keys its table.

Each service declares its own tables on its own :class:`~sqlalchemy.MetaData` (the kit's
names start with ``remote_risk_`` so the two can share a database); both name an index,
a unique constraint and a primary key the same way, so that the names Alembic's
revisions wrote and the names the metadata expects agree.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, MetaData

__all__ = ["NAMING_CONVENTION", "SEQUENCE_KEY", "new_metadata"]

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "pk": "pk_%(table_name)s",
}


def new_metadata() -> MetaData:
    """A service's metadata, with the shared naming convention."""
    return MetaData(naming_convention=dict(NAMING_CONVENTION))


SEQUENCE_KEY = BigInteger().with_variant(Integer(), "sqlite")
"""The type of a log's sequence number where it is the table's primary key: BIGINT, and
on SQLite INTEGER, the one declared type that makes a single-column primary key the row
id itself. Declared BIGINT there, the key is a second B-tree beside the table's own,
written with every row: a commit pays one more page, an insert one more index entry."""
