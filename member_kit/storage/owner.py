"""Whose storage it is: one member's, shared by that member's replicas only.

The kit's tables carry the same names for every member, so two members pointed at one
database (one PostgreSQL schema, one SQLite file) would share them: one team's decision
log would hold the other's entries and show them on its audit routes, and each would
read the other's tasks. Two members in one data directory would sign with the same keys
(``DATA_DIR/keys``), one identity to every coordinator. So the first process to open a
database writes its member's name into it (:func:`claim_for`), and the first to use a data
directory writes it into ``DATA_DIR/member`` (:func:`claim_directory`); a process of
another member then refuses to start
(:class:`~member_kit.errors.DatabaseOfAnotherMember`,
:class:`~member_kit.errors.DataDirectoryOfAnotherMember`), and a replica of the same
member starts as before. Storage from before this rule is claimed by the first member to
start on it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from sqlalchemy import Engine

from member_kit.errors import DatabaseOfAnotherMember, DataDirectoryOfAnotherMember
from member_kit.storage.engine import driver_sql, driver_write
from member_kit.storage.schema import database_member

_CLAIM = (
    f"INSERT INTO {database_member.name} (name) SELECT :name"
    f" WHERE NOT EXISTS (SELECT 1 FROM {database_member.name})"
    " ON CONFLICT (name) DO NOTHING"
)
_NAMES = f"SELECT name FROM {database_member.name}"
MEMBER_FILE = "member"


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


def claim_directory(data_dir: Path, member: str) -> None:
    """Make ``data_dir`` ``member``'s if it is nobody's yet (its name written whole into
    ``DATA_DIR/member``, by a link that fails if another process made it first); raise
    :class:`DataDirectoryOfAnotherMember` if it is another member's. An ``OSError``
    (a directory that cannot be made or written) is the caller's to report."""
    data_dir.mkdir(parents=True, exist_ok=True)
    marker = data_dir / MEMBER_FILE
    if not marker.exists():
        with tempfile.NamedTemporaryFile("w", dir=data_dir, delete=False) as written:
            written.write(member + "\n")
        try:
            os.link(written.name, marker)
        except FileExistsError:
            pass  # another process claimed it first: whose it is is read below
        finally:
            os.unlink(written.name)
    owner = marker.read_text(encoding="utf-8").strip()
    if owner != member:
        raise DataDirectoryOfAnotherMember(owner, member)
