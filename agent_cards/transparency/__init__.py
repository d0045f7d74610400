"""What a service can prove to others, shared by both services (each imports it, neither
is imported here): ``merkle`` (RFC 9162 trees, inclusion and consistency proofs),
``statements`` (signed statements: compact JWS by a service's card key), ``heads``
(signed tree heads of a log) and ``receipts`` (the receipts extension: what a remote
answered, signed by it).
"""

__all__: list[str] = []
