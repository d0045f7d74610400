"""What a service can prove to others, shared by both services (each imports it, neither
is imported here): ``merkle`` (RFC 9162 trees, inclusion and consistency proofs),
``statements`` (signed statements: compact JWS by a service's card key), ``heads``
(signed tree heads of a log), ``receipts`` (the receipts extension: what a remote
answered, signed by it) and ``logged`` (a head of a log read from the statement that
states it: a tree head, or a receipt with its log's size and root).
"""

__all__: list[str] = []
