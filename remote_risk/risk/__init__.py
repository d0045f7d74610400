"""The risk team's own work: the policy skill, and its model-backed interpreter."""

__all__: list[str] = []
