"""Telling the database failing (retry later) from a bug (answer it, end the task).

A storage fault is a statement the database refused or failed for a reason of its own:
the file read-only or the disk full, an I/O error, a lock not granted in time, the server
gone. Work cut off by one is not a failure of the task: its lease runs out and the task
is resumed once the database is back (see :mod:`member_kit.tasks.leases`).
"""

from __future__ import annotations

from agent_cards.storage.faults import is_storage_fault

__all__ = ["is_storage_fault"]
