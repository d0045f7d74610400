"""Return admission: what a remote sends back is untrusted evidence until admitted here.

A returned task is judged by the handoff's :class:`~contracts.returns.ReturnContract`. It is
admitted only if it is the task we created, it is completed, it carries the handoff binding
when the contract asks for it, its artifacts are within the contract's size and media-type
limits, and

* under the ``finding`` contract, exactly one strict finding is present and every evidence
  id it cites is a record we actually sent to that target;
* under a ``json_schema`` contract, its one JSON data part matches the declared schema.

Under ``held_for_review`` (no contract declared) nothing is admitted: a return that passes
the identity checks is *held*, kept with its hash and size for an operator to look at.
Every decision carries a reason and a hash of what was judged.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import Any

import jsonschema
import pydantic
import referencing.exceptions

from contracts import strict_json
from contracts.evidence import Finding, FindingStatus
from contracts.returns import ReturnContract, ReturnContractKind
from contracts.wire import Artifact, Part, Task, TaskState, to_wire
from coordinator.errors import describe_validation
from coordinator.handoff.receipt_check import (
    CheckedReceipt,
    ReceiptExpectation,
    covered_artifacts,
    receipt_problem,
)

K = ReturnContractKind
HELD_FOR_REVIEW = "held_for_review"
_MAX_REASON = 300

# A remote's error code is shown in a handoff's reason only if it looks like one.
_REMOTE_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str
    content_hash: str
    size: int
    finding: Finding | None = None
    # Kept but neither admitted nor refused: no declared contract could judge it.
    held: bool = False
    # The remote's verified receipt (its compact JWS and claims), for the ledger.
    receipt: CheckedReceipt | None = None

    @property
    def verdict(self) -> str:
        if self.admitted:
            return "admitted"
        return HELD_FOR_REVIEW if self.held else "rejected"


def content_digest(covered: str) -> tuple[str, int]:
    """The ``content_hash`` and size of the artifacts' JSON text (:func:`covered_artifacts`)."""
    encoded = covered.encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest(), len(encoded)


def artifact_content(task: Task) -> list[dict[str, Any]]:
    """What was returned, as kept for review or diagnosis (never admitted as such)."""
    return [
        a.model_dump(mode="json", by_alias=True, exclude_none=True) for a in task.artifacts or []
    ]


def _refuse(reason: str, digest: tuple[str, int]) -> Admission:
    return Admission(False, reason[:_MAX_REASON], *digest)


def _binding_problem(task: Task, expected: tuple[str, int]) -> str | None:
    """The task must be bound to the handoff we dispatched. A retried attempt may get back
    the task an earlier attempt of the same handoff created (same idempotency key), so an
    earlier attempt number is accepted; a later one, or another handoff, is not."""
    metadata = task.metadata or {}
    if "handoffId" not in metadata:
        return "handoff_binding_missing"
    handoff_id, attempt = expected
    seen = _attempt_number(metadata.get("attempt"))
    if metadata.get("handoffId") != handoff_id or seen is None:
        return "handoff_mismatch"
    if not 1 <= seen <= attempt:
        return "handoff_mismatch"
    return None


def _attempt_number(value: Any) -> int | None:
    """The attempt number echoed: an integer, or a number with no fraction (a protobuf
    ``Struct`` holds every number as a double, so agents built on one echo ``1.0``);
    never a boolean or a string."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None


def _data_part(artifacts: list[Artifact]) -> Any:
    """The single JSON data part of ``artifacts``, or ValueError."""
    data_parts = [
        part for artifact in artifacts for part in artifact.parts if part.data is not None
    ]
    if len(data_parts) != 1:
        raise ValueError(f"expected exactly one data part, found {len(data_parts)}")
    return data_parts[0].data


def finding_in(artifacts: list[Artifact]) -> Finding:
    """The single ``Finding`` carried in a data part, parsed strictly, or ValueError."""
    data = _data_part(artifacts)
    try:
        return Finding.model_validate(data, strict=False)
    except pydantic.ValidationError as exc:
        raise ValueError(describe_validation(exc)) from None


def media_type_of(part: Part) -> str:
    """A part's declared media type, or what its content kind implies."""
    if part.media_type:
        return part.media_type.split(";")[0].strip().lower()
    if part.data is not None:
        return "application/json"
    if part.text is not None:
        return "text/plain"
    return "application/octet-stream"


def _limit_problem(task: Task, contract: ReturnContract, size: int) -> str | None:
    if size > contract.max_bytes:
        return f"artifact_too_large: {size} bytes, over {contract.max_bytes}"
    for artifact in task.artifacts or []:
        for part in artifact.parts:
            media = media_type_of(part)
            if media not in contract.media_types:
                return f"media_type_not_allowed: {media}"
    return None


def admit_task(
    task: Task,
    *,
    expected_task_id: str,
    contract: ReturnContract,
    expected_handoff: tuple[str, int] | None = None,
    receipt: ReceiptExpectation | None = None,
) -> Admission:
    """Judge a returned task by ``contract``; ``expected_handoff`` is the attempt we
    dispatched (None for a return that already lost its race and is only kept);
    ``receipt`` what the remote's receipt must state, when its card declares receipts.
    A hop receipt the artifacts carry that is refused refuses the return with its reason,
    the remote's own receipt (and the refusal) still kept."""
    wire = to_wire(task)  # serialised once: the digest, the receipt and its hops
    covered = covered_artifacts(task, wire)
    digest = content_digest(covered)
    if task.id != expected_task_id:
        return _refuse("task_mismatch", digest)
    if contract.check_binding and expected_handoff is not None:
        problem = _binding_problem(task, expected_handoff)
        if problem:
            return _refuse(problem, digest)
    checked = receipt_problem(task, receipt, covered, wire) if receipt is not None else None
    if isinstance(checked, str):
        return _refuse(checked, digest)
    if checked is not None and checked.hop_refusal is not None:  # kept, then refused
        return replace(_refuse(checked.hop_refusal.reason, digest), receipt=checked)
    admission = _judge(task, contract, digest)
    if checked is None:
        return admission
    return replace(admission, receipt=checked)


def _judge(task: Task, contract: ReturnContract, digest: tuple[str, int]) -> Admission:
    if task.status.state is not TaskState.COMPLETED:
        return _refuse("not_completed", digest)
    if not task.artifacts:
        return _refuse("no_artifact", digest)
    if contract.kind is K.HELD_FOR_REVIEW:
        return Admission(False, HELD_FOR_REVIEW, *digest, held=True)
    problem = _limit_problem(task, contract, digest[1])
    if problem:
        return _refuse(problem, digest)
    if contract.kind is K.JSON_SCHEMA:
        return _judge_schema(task.artifacts, contract, digest)
    return _judge_finding(task.artifacts, contract, digest)


def _judge_finding(
    artifacts: list[Artifact], contract: ReturnContract, digest: tuple[str, int]
) -> Admission:
    try:
        finding = finding_in(artifacts)
    except ValueError as exc:
        return _refuse(f"finding_invalid: {exc}", digest)
    unknown = sorted(set(finding.evidence_ids) - set(contract.sent_record_ids))
    if unknown:
        return _refuse(f"unknown_evidence: {', '.join(unknown)}", digest)
    return Admission(True, "finding_admitted", *digest, finding=finding)


def _judge_schema(
    artifacts: list[Artifact], contract: ReturnContract, digest: tuple[str, int]
) -> Admission:
    try:
        data = _data_part(artifacts)
    except ValueError as exc:
        return _refuse(f"schema_mismatch: {exc}", digest)
    problem = schema_problem(data, contract.json_schema or {})
    if problem:
        return _refuse(f"schema_mismatch: {problem}", digest)
    return Admission(True, "schema_matched", *digest)


def schema_problem(instance: Any, schema: dict[str, Any]) -> str | None:
    """The first way ``instance`` fails ``schema`` (Draft 2020-12), or None if it matches.

    Said in terms of the schema (where, which keyword, what it asks), never by quoting
    the untrusted instance back into the record."""
    validator = jsonschema.Draft202012Validator(schema)
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    except referencing.exceptions.Unresolvable as exc:
        return f"schema reference {exc.ref!r} cannot be resolved (nothing is fetched)"
    if error is None:
        return None
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
    asked = strict_json.dumps(error.validator_value).decode()
    if len(asked) > 80:
        asked = asked[:77] + "..."
    return f"at {where}: {error.validator} {asked}"


def admit_interruption(task: Task, contract: ReturnContract) -> Admission:
    """An interrupted task may explain what it lacks; only a ``needs_input`` Finding counts,
    and only under the ``finding`` contract.

    It is read from the status message as untrusted evidence: it never counts as success,
    and it grants nothing (an auth-required task is not an authorization).
    """
    digest = ("", 0)
    message = task.status.message
    if message is None or contract.kind is not K.FINDING:
        return Admission(False, "interrupted_without_finding", *digest)
    try:
        finding = finding_in([Artifact(artifact_id="status", parts=message.parts)])
    except ValueError as exc:
        return Admission(False, f"finding_invalid: {exc}", *digest)
    if finding.status is not FindingStatus.NEEDS_INPUT:
        return Admission(False, "finding_inconsistent_with_state", *digest)
    if set(finding.evidence_ids) - set(contract.sent_record_ids):
        return Admission(False, "unknown_evidence", *digest)
    return Admission(True, "needs_input_admitted", *digest, finding=finding)


def failure_admission(task: Task) -> Admission:
    """Read the remote's failed Finding, if it sent one, only to learn its error code."""
    message = task.status.message
    code = "remote_failed"
    if message is not None:
        try:
            reported = finding_in([Artifact(artifact_id="status", parts=message.parts)])
        except ValueError:
            reported = None
        if reported is not None and reported.error_code:
            code = reported.error_code
    failed = Finding(
        status=FindingStatus.FAILED,
        summary="The remote specialist did not produce a result.",
        error_code=code,
    )
    return Admission(False, "remote_failed", "", 0, finding=failed)


def failed_reason(task: Task) -> str:
    """``remote_failed``, with the remote's own error code when it gave a well-formed one
    (``remote_failed:model_timeout``), so the reason crosses the boundary."""
    finding = failure_admission(task).finding
    code = finding.error_code if finding is not None else None
    if code and code != "remote_failed" and _REMOTE_CODE.fullmatch(code):
        return f"remote_failed:{code}"
    return "remote_failed"
