"""The pilot-assessment scenario: frozen records and the cases the demo runs.

A product colleague asks whether there is consistent material to draft an assessment of a
20-person reply-assistant pilot. Operations knows the plan, risk knows the policy, and a
privacy specialist takes over when real conversations would be used. ``private_note`` is
a synthetic internal record that must never leave the coordinator.
"""

from __future__ import annotations

import copy
from typing import Any

CASES = ("ok", "missing", "failure", "conflict", "handoff")
# The assessment each case must end with (the demo checks it, and says how many did).
EXPECTED_STATUS = {
    "ok": "ready_for_draft",
    "missing": "needs_input",
    "failure": "failed",
    "conflict": "conflict",
    "handoff": "needs_review",
}

BRIEF: dict[str, Any] = {
    "id": "brief-001",
    "goal": "Establish whether there is consistent material for a pilot assessment draft.",
    "staff_requested": 20,
    "uses_real_conversations": False,
}
OPERATIONS_NOTE: dict[str, Any] = {
    "id": "ops-plan-001",
    "staff": 20,
    "measured_results": False,
    "reply_suggestions_permitted": True,
    "refund_execution_permitted": False,
}
POLICY_NOTE: dict[str, Any] = {
    "id": "risk-policy-007",
    "refund_execution_permitted": False,
    "real_conversations_require_privacy_review": True,
}
PRIVATE_NOTE: dict[str, Any] = {
    "id": "private-001",
    "text": "SYNTHETIC-PRIVATE-NOTE: internal staffing remark, never to be shared.",
}

# Which context keys each recipient may see. Nothing else is ever projected to it.
CONTEXT_KEYS: dict[str, tuple[str, ...]] = {
    "operations": ("brief", "operations_note"),
    "risk": ("brief", "policy_note"),
    "privacy": ("brief",),
}


def context_for(case: str) -> dict[str, Any]:
    """The coordinator's full context for ``case`` (a fresh deep copy every time)."""
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; choose one of {', '.join(CASES)}")
    context: dict[str, Any] = {
        "brief": copy.deepcopy(BRIEF),
        "operations_note": copy.deepcopy(OPERATIONS_NOTE),
        "policy_note": copy.deepcopy(POLICY_NOTE),
        "private_note": copy.deepcopy(PRIVATE_NOTE),
    }
    if case == "missing":
        del context["policy_note"]
    elif case == "failure":
        # The documented way to make the remote risk skill fail (see remote_risk.risk.skill).
        context["policy_note"]["simulate_failure"] = True
    elif case == "conflict":
        context["operations_note"]["refund_execution_permitted"] = True
    elif case == "handoff":
        context["brief"]["uses_real_conversations"] = True
    return context
