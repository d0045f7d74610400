"""The risk team's own work: the policy skill, and its model-backed interpreter."""

from remote_risk.risk.skill import SKILL_ID

__all__ = ["SKILL_ID"]
