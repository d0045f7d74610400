"""Who may do what: the run's root authority, one narrowed token per handoff attempt.

``delegator`` (root grant and narrowed children), ``tokens`` (compact JWS minting),
``identity`` (the coordinator's signing keys and issuer).
"""

from coordinator.authority.delegator import Delegator, MintedGrant, RunAuthority
from coordinator.authority.tokens import mint_token

__all__ = ["Delegator", "MintedGrant", "RunAuthority", "mint_token"]
