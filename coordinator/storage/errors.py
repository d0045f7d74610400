"""Errors of the durable store and the audit ledger.

::

    FederationError
    ├── StorageError        the database cannot be opened, migrated or written
    │     reasons: bad_database_url, storage_unavailable, migration_failed
    └── LedgerError         the audit ledger refused an event, a head or a bundle
          reasons: chain_conflict, event_invalid, head_invalid, bundle_invalid
"""

from __future__ import annotations

from coordinator.errors import FederationError


class StorageError(FederationError):
    default_reason = "storage_unavailable"


class LedgerError(FederationError):
    default_reason = "ledger_error"
