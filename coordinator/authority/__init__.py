"""Who may do what: the run's root authority, one narrowed token per handoff attempt.

``delegator`` (root grant and narrowed children), ``tokens`` (compact JWS minting),
``identity`` (the coordinator's signing keys and issuer).
"""

__all__: list[str] = []
