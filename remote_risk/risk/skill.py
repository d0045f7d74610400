"""The risk skill: what the risk policy says about a pilot proposal. Pure; no I/O.

Input is the context the coordinator projects for risk, ``{"brief": {...},
"policy_note": {...}}`` (see ``coordinator.assessment.scenario``). Output is a
:class:`~contracts.evidence.Finding`:

* ``ok`` with facts ``refund_execution_permitted`` (what the policy says) and
  ``privacy_review_required`` (the brief uses real conversations and the policy requires a
  privacy review for that), citing ``[policy id, brief id]``;
* ``needs_input`` when a record or a field the interpretation rests on is absent or not of
  the expected type; the missing paths are listed in ``facts["missing_inputs"]``. Nothing
  is ever guessed;
* :class:`~member_kit.errors.SkillFailure` with ``error_code`` ``policy_engine_unavailable``
  when ``policy_note.simulate_failure`` is ``true``: the documented way to exercise the
  failure path end to end.

Keys other than ``brief`` and ``policy_note`` are refused before the skill runs (see
:func:`input_problems`): the caller over-shared, which is a request error (InvalidParams),
not a finding, and refusing it up front keeps the extra data out of the task store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.evidence import Finding, FindingStatus
from member_kit.errors import SkillFailure

SKILL_ID = "interpret-risk-policy"
ACCEPTED_KEYS = ("brief", "policy_note")
FAILURE_SWITCH = "simulate_failure"
POLICY_ENGINE_UNAVAILABLE = "policy_engine_unavailable"

# The fields the interpretation reads, with the JSON type each must have.
_BRIEF_FIELDS = {"id": str, "uses_real_conversations": bool}
_POLICY_FIELDS = {
    "id": str,
    "refund_execution_permitted": bool,
    "real_conversations_require_privacy_review": bool,
}


def input_problems(context: object) -> list[str]:
    """Why ``context`` is not an acceptable input at all (empty when it is acceptable)."""
    if not isinstance(context, dict):
        return ["must be a JSON object with the keys brief and policy_note"]
    problems = []
    unexpected = sorted(set(context) - set(ACCEPTED_KEYS))
    if unexpected:
        problems.append(
            f"unexpected keys {', '.join(unexpected)}; the risk skill accepts only "
            f"{' and '.join(ACCEPTED_KEYS)}"
        )
    problems.extend(
        f"{key} must be a JSON object"
        for key in ACCEPTED_KEYS
        if key in context and not isinstance(context[key], dict)
    )
    return problems


def interpret_risk_policy(context: Mapping[str, Any]) -> Finding:
    """Interpret the risk policy for the brief; raise SkillFailure if the engine fails."""
    missing_records = [key for key in ACCEPTED_KEYS if key not in context]
    if missing_records:
        return _needs_input(context, missing_records)
    brief, policy = context["brief"], context["policy_note"]
    if policy.get(FAILURE_SWITCH) is True:
        raise SkillFailure(
            POLICY_ENGINE_UNAVAILABLE,
            "The policy engine is unavailable; the risk policy was not interpreted.",
        )
    missing_fields = _missing("brief", brief, _BRIEF_FIELDS) + _missing(
        "policy_note", policy, _POLICY_FIELDS
    )
    if missing_fields:
        return _needs_input(context, missing_fields)
    return _interpretation(brief, policy)


def failed_finding(failure: SkillFailure) -> Finding:
    """The Finding a failed task carries: status failed, the failure's code and message."""
    return Finding(
        status=FindingStatus.FAILED,
        summary=failure.message,
        error_code=failure.error_code,
    )


def _interpretation(brief: Mapping[str, Any], policy: Mapping[str, Any]) -> Finding:
    refunds = policy["refund_execution_permitted"]
    real_conversations = brief["uses_real_conversations"]
    review = real_conversations and policy["real_conversations_require_privacy_review"]
    return Finding(
        status=FindingStatus.OK,
        summary=_summary(policy["id"], refunds, real_conversations, review),
        facts={"refund_execution_permitted": refunds, "privacy_review_required": review},
        evidence_ids=(policy["id"], brief["id"]),
    )


def _summary(policy_id: str, refunds: bool, real_conversations: bool, review: bool) -> str:
    refund_text = "permits" if refunds else "does not permit"
    if review:
        privacy_text = "a privacy review is required because real conversations would be used"
    elif real_conversations:
        privacy_text = "the policy requires no privacy review for real conversations"
    else:
        privacy_text = "no privacy review is required because no real conversations are used"
    return f"Policy {policy_id} {refund_text} refund execution; {privacy_text}."


def _needs_input(context: Mapping[str, Any], missing: list[str]) -> Finding:
    return Finding(
        status=FindingStatus.NEEDS_INPUT,
        summary=f"Cannot interpret the risk policy without: {', '.join(missing)}.",
        facts={"missing_inputs": missing},
        evidence_ids=_known_ids(context),
    )


def _missing(name: str, record: Mapping[str, Any], fields: Mapping[str, type]) -> list[str]:
    """Paths of fields that are absent or of the wrong JSON type (``1`` is not ``true``)."""
    return [
        f"{name}.{field}"
        for field, kind in fields.items()
        if type(record.get(field)) is not kind or (kind is str and not record[field])
    ]


def _known_ids(context: Mapping[str, Any]) -> tuple[str, ...]:
    ids = (record.get("id") for record in context.values() if isinstance(record, dict))
    return tuple(value for value in ids if isinstance(value, str) and value)
