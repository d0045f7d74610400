"""What specialists return (``Finding``) and what the coordinator concludes (``Assessment``).

The merge is a pure rule with a fixed order: an execution failure first, then missing
input, then a contradiction between facts that two specialists both state, then a
required privacy review, and only then ``ready_for_draft``. Nothing is decided by
majority, and ``ready_for_draft`` approves nothing: it says the material is consistent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, StrictStr
from pydantic.alias_generators import to_camel

from contracts.model import Model


class FindingStatus(StrEnum):
    OK = "ok"
    NEEDS_INPUT = "needs_input"
    FAILED = "failed"


class AssessmentStatus(StrEnum):
    READY_FOR_DRAFT = "ready_for_draft"
    NEEDS_INPUT = "needs_input"
    FAILED = "failed"
    CONFLICT = "conflict"
    NEEDS_REVIEW = "needs_review"


FINDING_MEDIA_TYPE = "application/vnd.a2a-federation.finding+json"

# Facts that more than one specialist may state about the same thing. If two findings
# disagree on one of these, the assessment is a conflict for the final owner to reconcile.
SHARED_FACTS = ("refund_execution_permitted",)


class _Governed(Model):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
    )


class Finding(_Governed):
    """A specialist's return: a status, a readable summary, inspectable facts, its sources."""

    status: FindingStatus
    summary: Annotated[StrictStr, Field(min_length=1, max_length=2000)]
    facts: dict[str, Any] = Field(default_factory=dict)
    evidence_ids: tuple[StrictStr, ...] = ()
    error_code: StrictStr | None = None


class Conflict(_Governed):
    fact: str
    values: dict[str, Any]


class Assessment(_Governed):
    status: AssessmentStatus
    summary: str
    sources: tuple[str, ...] = ()
    conflicts: tuple[Conflict, ...] = ()


def merge(findings: Sequence[tuple[str, Finding]]) -> Assessment:
    """Combine ``(specialist, finding)`` pairs into one assessment, in the fixed order."""
    items = [finding for _, finding in findings]
    sources = _sources(items)
    if any(item.status is FindingStatus.FAILED for item in items):
        return Assessment(
            status=AssessmentStatus.FAILED,
            summary="Assessment incomplete: a specialist failed; this is not a policy rejection.",
            sources=sources,
        )
    if any(item.status is not FindingStatus.OK for item in items):
        return Assessment(
            status=AssessmentStatus.NEEDS_INPUT,
            summary="Assessment incomplete: required information is missing.",
            sources=sources,
        )
    conflicts = find_conflicts(findings)
    if conflicts:
        names = ", ".join(conflict.fact for conflict in conflicts)
        return Assessment(
            status=AssessmentStatus.CONFLICT,
            summary=f"Records disagree on {names}; reconciliation needed, nothing was voted.",
            sources=sources,
            conflicts=conflicts,
        )
    if any(item.facts.get("privacy_review_required") is True for item in items):
        return Assessment(
            status=AssessmentStatus.NEEDS_REVIEW,
            summary="Privacy clarification is required before using real conversations.",
            sources=sources,
        )
    return Assessment(
        status=AssessmentStatus.READY_FOR_DRAFT,
        summary="Consistent material for an assessment draft; nothing is approved.",
        sources=sources,
    )


def find_conflicts(findings: Sequence[tuple[str, Finding]]) -> tuple[Conflict, ...]:
    conflicts = []
    for fact in SHARED_FACTS:
        stated = {name: f.facts[fact] for name, f in findings if fact in f.facts}
        if len({_freeze(value) for value in stated.values()}) > 1:
            conflicts.append(Conflict(fact=fact, values=stated))
    return tuple(conflicts)


def _sources(items: Iterable[Finding]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for item in items:
        seen.update(dict.fromkeys(item.evidence_ids))
    return tuple(seen)


def _freeze(value: Any) -> str:
    return repr(value)
