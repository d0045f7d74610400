"""The tamper-evident audit: every cross-service fact, hash-chained, and read back.

``log`` (the ledger itself: events sealed into a hash chain, its signed chain and tree
heads, ``audit verify``), ``ledger`` (the ledger's public names gathered), ``bundles``
(``audit export``), ``proofs`` and ``proof_check`` (``audit prove``, ``audit
consistency``, ``audit verify --bundle``), ``anchors`` (the reader's keys a bundle is
checked against), ``receipt_binding`` and ``hop_binding`` (a bundle's receipts and hops
against its ledger), ``receipts`` (remotes' receipts kept as events), ``successions``
(a key's successors), ``trail`` (a run's facts on their way to the ledger),
``reconstruction`` (a run rebuilt from its events alone).
"""

__all__: list[str] = []
