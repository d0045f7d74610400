"""Whose database it is: one member's, shared by that member's replicas only.

The kit's tables carry the same names for every member, so two members pointed at one
database (one PostgreSQL schema, one SQLite file) would share them: one team's decision
log would hold the other's entries and show them on its audit routes, and each would
read the other's tasks and keys. The first process to open a database writes its
member's name into it; a process of another member then refuses to start
(:class:`~member_kit.errors.DatabaseOfAnotherMember`), and a replica of the same member
starts as before. A database written before this rule is claimed by the first member to
start on it.
"""

from __future__ import annotations

from sqlalchemy import Engine

from member_kit.errors import DatabaseOfAnotherMember
from member_kit.storage.engine import driver_sql, driver_write
from member_kit.storage.schema import database_member

_CLAIM = (
    f"INSERT INTO {database_member.name} (name) SELECT :name"
    f" WHERE NOT EXISTS (SELECT 1 FROM {database_member.name})"
    " ON CONFLICT (name) DO NOTHING"
)
_NAMES = f"SELECT name FROM {database_member.name}"


def claim_for(engine: Engine, member: str) -> None:
    """Make the database ``member``'s if it is nobody's yet; raise
    :class:`DatabaseOfAnotherMember` if it is another member's (two members that opened
    it at the same moment are each refused: neither is its sole owner)."""
    with driver_write(engine) as cursor:
        cursor.execute(driver_sql(engine, _CLAIM), {"name": member})
        cursor.execute(_NAMES)
        names = {row[0] for row in cursor.fetchall()}
    others = sorted(names - {member})
    if others:
        raise DatabaseOfAnotherMember(others[0], member)
