"""remote_risk's own audit: its decision log as a Merkle log with signed heads, the
receipts it issues, and the heads of the coordinator's ledger it was shown.

``log`` (entries, RFC 9162 tree, signed heads, proofs), ``witness`` (heads of other
logs kept), ``receipts`` (the receipts extension, issued with every terminal task),
``routes`` (the operator's GET routes for heads and proofs).
"""

__all__: list[str] = []
