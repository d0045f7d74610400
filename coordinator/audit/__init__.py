"""The tamper-evident audit: every cross-service fact, hash-chained, and read back.

``ledger`` gathers the ledger's public names: ``events`` (records, redaction, sealing),
``chain`` (serialised appends), ``merkle`` (RFC 9162 trees and proofs), ``signing`` and
``tree_heads`` (signed chain and tree heads), ``verification`` (``audit verify``),
``bundles`` (``audit export``), ``proofs`` and ``proof_check`` (``audit prove``,
``audit consistency``, ``audit verify --bundle``), ``anchors`` (the reader's keys a
bundle is checked against), ``receipt_binding`` (a bundle's receipts against its ledger),
``receipts`` (remotes' receipts kept as events). ``trail`` (a run's facts on their way
to the ledger), ``reconstruction`` (a run rebuilt from its events alone).
"""

__all__: list[str] = []
