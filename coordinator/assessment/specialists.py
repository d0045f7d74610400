"""The specialists that run inside the coordinator's process: operations and privacy.

They are deterministic doubles over frozen records, so the control behaviour around them
can be observed exactly. Each receives only its projected context and returns a Finding.
"""

from __future__ import annotations

from typing import Any

from contracts.evidence import Finding, FindingStatus


def operations(projected: dict[str, Any]) -> Finding:
    """Extract the plan facts: staff, measured results, claimed refund authority."""
    plan = projected.get("operations_note")
    if not isinstance(plan, dict):
        return Finding(status=FindingStatus.NEEDS_INPUT, summary="No operations plan supplied.")
    facts = {
        "staff": plan.get("staff"),
        "measured_results": plan.get("measured_results"),
        "refund_execution_permitted": plan.get("refund_execution_permitted"),
    }
    summary = (
        f"Plan covers {facts['staff']} staff; measured results: "
        f"{'yes' if facts['measured_results'] else 'none yet'}; refund execution "
        f"{'claimed' if facts['refund_execution_permitted'] else 'not permitted'}."
    )
    evidence = tuple(
        record["id"] for record in (plan, projected.get("brief")) if isinstance(record, dict)
    )
    return Finding(status=FindingStatus.OK, summary=summary, facts=facts, evidence_ids=evidence)


def privacy(projected: dict[str, Any]) -> Finding:
    """Take over the run and ask the clarification question; approves nothing."""
    cited = (projected.get("brief"), projected.get("risk_finding"))
    question = (
        "Before real support conversations are used: what consent basis applies, and which "
        "redaction controls remove customer identifiers before any assistant sees them?"
    )
    return Finding(
        status=FindingStatus.OK,
        summary="Privacy clarification requested; no data use is approved.",
        facts={"clarification_question": question, "data_use_approved": False},
        evidence_ids=tuple(record["id"] for record in cited if isinstance(record, dict)),
    )
