"""Context projection hands each recipient only its keys, as an independent copy."""

from __future__ import annotations

import pytest

from coordinator.assessment import scenario
from coordinator.handoff.projection import ProjectionError, project_context, record_ids


def test_risk_never_sees_private_or_operations_records() -> None:
    """The risk view holds the brief and the policy, and nothing else."""
    view = project_context(scenario.context_for("ok"), scenario.CONTEXT_KEYS["risk"])
    assert set(view) == {"brief", "policy_note"}
    assert "SYNTHETIC-PRIVATE-NOTE" not in repr(view)


def test_projection_is_a_deep_copy() -> None:
    """Changing a projected nested record does not change the coordinator's context."""
    context = scenario.context_for("ok")
    view = project_context(context, ("brief",))
    view["brief"]["goal"] = "changed"
    assert context["brief"]["goal"] != "changed"


def test_non_json_and_oversized_context_is_refused() -> None:
    """Non-finite numbers and oversized projections are refused, not truncated."""
    with pytest.raises(ProjectionError):
        project_context({"a": float("nan")}, ("a",))
    with pytest.raises(ProjectionError):
        project_context({"a": "x" * 100}, ("a",), limit=50)


def test_record_ids_are_the_citable_evidence() -> None:
    """Only records with a string id count as evidence a recipient may cite."""
    assert record_ids({"a": {"id": "r1"}, "b": {"id": 3}, "c": "text"}) == {"r1"}
