"""Return admission: what a remote sends back is untrusted evidence until admitted here.

A returned task is admitted only if it is the task we created, it is completed, and its
artifacts parse strictly. When the specialist follows the ``Finding`` contract, exactly
one finding must be present and every evidence id it cites must be a record we actually
sent to that target. Every decision carries a reason and a hash of what was judged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass

import pydantic

from contracts import strict_json
from contracts.evidence import Finding
from contracts.wire import Artifact, Task, TaskState, to_wire
from coordinator.errors import describe_validation


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str
    content_hash: str
    size: int
    finding: Finding | None = None


def content_digest(task: Task) -> tuple[str, int]:
    encoded = strict_json.dumps([to_wire(artifact) for artifact in task.artifacts or []])
    return "sha256:" + hashlib.sha256(encoded).hexdigest(), len(encoded)


def _refuse(reason: str, digest: tuple[str, int]) -> Admission:
    return Admission(False, reason, *digest)


def _binding_problem(task: Task, expected: tuple[str, int]) -> str | None:
    """The task must be bound to the handoff we dispatched. A retried attempt may get back
    the task an earlier attempt of the same handoff created (same idempotency key), so an
    earlier attempt number is accepted; a later one, or another handoff, is not."""
    metadata = task.metadata or {}
    if "handoffId" not in metadata:
        return "handoff_binding_missing"
    handoff_id, attempt = expected
    seen = metadata.get("attempt")
    if metadata.get("handoffId") != handoff_id or type(seen) is not int:
        return "handoff_mismatch"
    if not 1 <= seen <= attempt:
        return "handoff_mismatch"
    return None


def finding_in(artifacts: list[Artifact]) -> Finding:
    """The single ``Finding`` carried in a data part, parsed strictly, or ValueError."""
    data_parts = [
        part for artifact in artifacts for part in artifact.parts if part.data is not None
    ]
    if len(data_parts) != 1:
        raise ValueError(f"expected exactly one data part, found {len(data_parts)}")
    try:
        return Finding.model_validate(data_parts[0].data, strict=False)
    except pydantic.ValidationError as exc:
        raise ValueError(describe_validation(exc)) from None


def admit_task(
    task: Task,
    *,
    expected_task_id: str,
    sent_record_ids: Collection[str] | None,
    expected_handoff: tuple[str, int] | None = None,
) -> Admission:
    """Judge a returned task. ``sent_record_ids`` is None for agents outside our contract;
    for ours, the task must also carry the binding of the handoff attempt we dispatched."""
    digest = content_digest(task)
    if task.id != expected_task_id:
        return _refuse("task_mismatch", digest)
    if sent_record_ids is not None and expected_handoff is not None:
        problem = _binding_problem(task, expected_handoff)
        if problem:
            return _refuse(problem, digest)
    if task.status.state is not TaskState.COMPLETED:
        return _refuse("not_completed", digest)
    if not task.artifacts:
        return _refuse("no_artifact", digest)
    if sent_record_ids is None:
        return Admission(True, "artifacts_well_formed", *digest)
    try:
        finding = finding_in(task.artifacts)
    except ValueError as exc:
        return _refuse(f"finding_invalid: {exc}", digest)
    unknown = sorted(set(finding.evidence_ids) - set(sent_record_ids))
    if unknown:
        return _refuse(f"unknown_evidence: {', '.join(unknown)}", digest)
    return Admission(True, "finding_admitted", *digest, finding=finding)
