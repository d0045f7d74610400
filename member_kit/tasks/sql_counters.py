"""The database task store's counters: the status sequence, and how many tasks it holds.

Every change of a task takes the next numbers of ``task_sequence`` (one atomic bump per
write, shared by every replica). A send that opens a task also asks whether the store is
full; counting the table for that (``count(*)``) reads every row of an index, so a send
cost grew with the tasks kept: about 2 us at 1,000 tasks, 850 us at 100,000 (SQLite,
this project's row sizes). ``task_count`` keeps the number instead: a task about to be
inserted counts itself in (one statement, in place of the count, read back at once; its
transaction undone, the count is too) and an eviction counts out what it deletes, so a
send changes one row whatever the store holds.

The counter only says when to look: once it says the store is full, the table is
counted and the counter set to what was found before anything is evicted, so a counter
that went wrong (rows deleted by hand, a race between replicas on PostgreSQL, where the
count and the counter are read at different moments) never evicts a task, and is put
right at the next look. Every statement runs on the cursor of the store's open write.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.engine.interfaces import DBAPICursor

from member_kit.storage.engine import driver_sql
from member_kit.storage.schema import TASK_COUNT, TASK_SEQUENCE, counters, tasks
from member_kit.tasks.record import evictions_due
from member_kit.tasks.sql_rows import only_row

_C = counters.name
_BUMP = f"UPDATE {_C} SET value = value + :count WHERE name = '{TASK_SEQUENCE}' RETURNING value"
_RESERVE = f"UPDATE {_C} SET value = value + 1 WHERE name = '{TASK_COUNT}' RETURNING value"
_COUNT = f"SELECT count(*) FROM {tasks.name}"
_SET = f"UPDATE {_C} SET value = :value WHERE name = '{TASK_COUNT}'"
_REMOVED = f"UPDATE {_C} SET value = value - :removed WHERE name = '{TASK_COUNT}'"


class TaskCounters:
    def __init__(self, engine: Engine) -> None:
        self._sql = {
            name: driver_sql(engine, sql)
            for name, sql in (
                ("bump", _BUMP),
                ("reserve", _RESERVE),
                ("count", _COUNT),
                ("set", _SET),
                ("removed", _REMOVED),
            )
        }

    def bump(self, cursor: DBAPICursor, count: int) -> int:
        """The last of ``count`` new sequence numbers."""
        cursor.execute(self._sql["bump"], {"count": count})
        return int(only_row(cursor)[0])

    def reserve(self, cursor: DBAPICursor) -> int:
        """Count one more task, the one about to be inserted in this transaction; how many
        the counter says the store holds with it."""
        cursor.execute(self._sql["reserve"])
        return int(only_row(cursor)[0])

    def evictions_due(self, cursor: DBAPICursor, capacity: int, unwritten: int) -> int:
        """How many tasks to evict before the one about to be inserted (counted in here),
        ``unwritten`` others of this transaction waiting for their insert: none until the
        counter says the store is full, then what counting the table says
        (:func:`~member_kit.tasks.record.evictions_due`)."""
        if self.reserve(cursor) <= capacity:
            return 0
        stored = self.counted(cursor, pending=unwritten + 1) + unwritten
        return evictions_due(stored, capacity) if stored >= capacity else 0

    def counted(self, cursor: DBAPICursor, pending: int) -> int:
        """How many tasks the table holds, counted; the counter set to that and the
        ``pending`` ones this transaction counted and has not inserted yet."""
        cursor.execute(self._sql["count"])
        stored = int(only_row(cursor)[0])
        cursor.execute(self._sql["set"], {"value": stored + pending})
        return stored

    def removed(self, cursor: DBAPICursor, count: int) -> None:
        cursor.execute(self._sql["removed"], {"removed": count})
