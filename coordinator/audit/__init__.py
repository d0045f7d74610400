"""The tamper-evident audit: every cross-service fact, hash-chained, and read back.

``ledger`` (append, verify, export bundles), ``trail`` (a run's facts on their way to the
ledger), ``reconstruction`` (a run rebuilt from its events alone).
"""

from coordinator.audit.ledger import AuditEvent, Ledger, StoredEvent
from coordinator.audit.reconstruction import reconstruct
from coordinator.audit.trail import AuditTrail

__all__ = ["AuditEvent", "AuditTrail", "Ledger", "StoredEvent", "reconstruct"]
