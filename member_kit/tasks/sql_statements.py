"""The fixed SQL the database task store runs on the driver's connection (see
:func:`~member_kit.storage.engine.driver_write`): built once from the table's columns."""

from __future__ import annotations

from contracts.wire import TERMINAL_TASK_STATES
from member_kit.storage.schema import tasks
from member_kit.tasks.sql_rows import COLUMNS

TERMINAL = sorted(state.value for state in TERMINAL_TASK_STATES)

SELECT = f"SELECT {', '.join(COLUMNS)} FROM {tasks.name}"
BY_ID = f"{SELECT} WHERE id = :id"
SEQUENCE_OF = f"SELECT sequence FROM {tasks.name} WHERE id = :id"
TERMINAL_LIST = ", ".join(f"'{state}'" for state in TERMINAL)
EVICT_OLDEST_FINISHED = (
    f"DELETE FROM {tasks.name} WHERE id IN (SELECT id FROM {tasks.name} "
    f"WHERE state IN ({TERMINAL_LIST}) ORDER BY changed_at_ms, sequence LIMIT :count) "
    f"RETURNING {', '.join(COLUMNS)}, idempotency_key, key_expires_at_ms"
)
INSERT = (
    f"INSERT INTO {tasks.name} ({', '.join(COLUMNS)}, idempotency_key, key_expires_at_ms, "
    "worker, lease_until_ms) "
    f"VALUES ({', '.join(':' + name for name in COLUMNS)}, :idempotency_key, "
    ":key_expires_at_ms, :worker, :until)"
)
LEASE = f"UPDATE {tasks.name} SET worker = :worker, lease_until_ms = :until WHERE id = :id"
