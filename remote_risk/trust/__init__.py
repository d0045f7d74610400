"""Who may ask remote_risk for work: delegation-token verification, the replay record,
and the issuers it trusts."""

from remote_risk.trust.replay import ReplayGuard
from remote_risk.trust.sql_replay import SQLReplayGuard
from remote_risk.trust.verifier import DelegationVerifier

__all__ = ["DelegationVerifier", "ReplayGuard", "SQLReplayGuard"]
