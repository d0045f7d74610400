"""The audit ledger: every cross-service fact, append-only, hash-chained and Merkle-treed.

This module gathers the ledger's public names from the modules that implement them:

* :mod:`~coordinator.audit.log.events` — the records, their redaction and sealing (RFC 8785,
  SHA-256);
* :mod:`~coordinator.audit.log.chain` — :class:`Ledger`, serialised crash-safe appends;
* :mod:`~agent_cards.transparency.merkle` (shared with remote_risk) — RFC 9162 trees,
  inclusion and consistency proofs;
* :mod:`~coordinator.audit.log.signing` and :mod:`~coordinator.audit.log.tree_heads` — keys,
  signed chain heads and signed tree heads;
* :mod:`~coordinator.audit.log.verification` — ``audit verify`` over chain, tree and heads;
* :mod:`~coordinator.audit.bundles` — run bundles (``audit export``);
* :mod:`~coordinator.audit.proofs` and :mod:`~coordinator.audit.proof_check` — proof
  bundles for outsiders (``audit prove``, ``audit verify --bundle``) and consistency
  between tree heads (``audit consistency``).
"""

from coordinator.audit.bundles import BUNDLE_FORMAT, BUNDLE_TYP, export_bundle, verify_bundle
from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import (
    CORRELATION_FIELDS,
    DEFAULT_PROCESSORS,
    GENESIS_HASH,
    REDACTED,
    AuditEvent,
    Processor,
    StoredEvent,
    canonical_bytes,
    record_hash,
    redact_secrets,
    timestamp,
)
from coordinator.audit.log.signing import HEAD_TYP, public_jwk, sign_head, thumbprint, verify_head
from coordinator.audit.log.verification import Break, VerifyReport, verify
from coordinator.errors import LedgerError

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_TYP",
    "CORRELATION_FIELDS",
    "DEFAULT_PROCESSORS",
    "GENESIS_HASH",
    "HEAD_TYP",
    "REDACTED",
    "AuditEvent",
    "Break",
    "Ledger",
    "LedgerError",
    "Processor",
    "StoredEvent",
    "VerifyReport",
    "canonical_bytes",
    "export_bundle",
    "public_jwk",
    "record_hash",
    "redact_secrets",
    "sign_head",
    "thumbprint",
    "timestamp",
    "verify",
    "verify_bundle",
    "verify_head",
]
