"""The ledger itself: ``events`` (records, redaction, sealing), ``chain`` (serialised
appends to the hash chain), ``signing`` and ``tree_heads`` (signed chain heads and RFC 9162
tree heads), ``current_head`` (the head a token carries), ``verification`` (``audit
verify``: the chain, the tree and the heads checked). It knows nothing of runs, bundles or
receipts."""

__all__: list[str] = []
