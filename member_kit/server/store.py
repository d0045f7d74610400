"""The service's durable store: its tasks, its record of used tokens and holder proofs,
and what it learnt of revocations, in one database, opened and migrated on start."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine

from member_kit.errors import StorageUnavailable
from member_kit.storage.engine import open_engine
from member_kit.storage.faults import is_storage_fault
from member_kit.storage.migrations import migrate
from member_kit.storage.owner import claim_directory, claim_for
from member_kit.tasks.leases import DEFAULT_LEASE_SECONDS
from member_kit.tasks.retention import DEFAULT_RETENTION
from member_kit.tasks.sql import SQLTaskStore
from member_kit.trust.sql_replay import SQLProofReplayGuard, SQLReplayGuard, SQLRevocationStore


@dataclass(frozen=True)
class DurableStore:
    """The task store, replay guards and revocation state of one service, over one
    migrated engine."""

    engine: Engine
    tasks: SQLTaskStore
    replay_guard: SQLReplayGuard
    proof_replay: SQLProofReplayGuard
    revocations: SQLRevocationStore

    def close(self) -> None:
        self.engine.dispose()


def open_store(
    capacity: int,
    *,
    member: str,
    database_url: str | None = None,
    data_dir: Path | None = None,
    leeway: timedelta = timedelta(seconds=30),
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    retention: timedelta = DEFAULT_RETENTION,
) -> DurableStore:
    """Open (and migrate) the database named by ``database_url``, else the one in
    ``data_dir``, as ``member``'s (:mod:`member_kit.storage.owner`); raises
    :class:`~member_kit.errors.StorageUnavailable`, or
    :class:`~member_kit.errors.OfAnotherMember` (the database or data directory is
    another member's)."""
    if data_dir is not None:
        _claim_directory(data_dir, member)
    engine = open_engine(database_url, data_dir, member)
    try:
        migrate(engine)
        _claim(engine, member)
    except BaseException:
        engine.dispose()
        raise
    return DurableStore(
        engine,
        SQLTaskStore(engine, capacity, lease_seconds=lease_seconds, retention=retention),
        SQLReplayGuard(engine, leeway=leeway),
        SQLProofReplayGuard(engine),
        SQLRevocationStore(engine),
    )


def _claim(engine: Engine, member: str) -> None:
    try:
        claim_for(engine, member)
    except Exception as exc:
        if not is_storage_fault(exc):
            raise
        raise StorageUnavailable(f"the database cannot be written: {exc}") from None


def _claim_directory(data_dir: Path, member: str) -> None:
    try:
        claim_directory(data_dir, member)
    except OSError as exc:
        raise StorageUnavailable(f"the data directory cannot be written: {exc}") from None
