"""Where one coordinator keeps its state: the data directory and its database.

The database is SQLite in the data directory unless a URL is given (``--database-url``
or ``FEDERATION_DATABASE_URL``), and its schema is migrated the first time it is opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sqlalchemy import Engine

from coordinator.audit.ledger import Ledger
from coordinator.audit.trail import AuditTrail
from coordinator.errors import UsageError
from coordinator.storage.datadir import DataDir
from coordinator.storage.engine import DATABASE_FILE, open_engine
from coordinator.storage.runs import RunStore

DATABASE_ENV = "FEDERATION_DATABASE_URL"


@dataclass
class Workspace:
    data: DataDir
    database_url: str | None = None
    _engine: Engine | None = field(default=None, repr=False)

    @classmethod
    def resolve(cls, data: DataDir, database_url: str | None = None) -> Workspace:
        return cls(data, database_url or os.environ.get(DATABASE_ENV) or None)

    def require_existing(self) -> None:
        """For commands that only read: refuse a data directory that holds no database,
        rather than create an empty one and report on it."""
        if self.database_url is None and not self.data.path(DATABASE_FILE).exists():
            raise UsageError(
                f"no ledger in {self.data.path()}: nothing has been recorded there",
                "no_ledger",
            )

    def engine(self) -> Engine:
        if self._engine is None:
            from coordinator.storage.migrations import migrate  # Alembic: only when opened

            engine = open_engine(self.database_url or self.data)
            migrate(engine)
            self._engine = engine
        return self._engine

    def run_store(self) -> RunStore:
        return RunStore(self.engine())

    def ledger(self) -> Ledger:
        return Ledger(self.engine())

    def trail(self, actor: str = "coordinator") -> AuditTrail:
        return AuditTrail(self.ledger(), actor)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
