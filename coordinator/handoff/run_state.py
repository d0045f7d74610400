"""A run's state, derived from its handoff records: the one rule every view and the writer use.

The handoff records are the facts: the book commits each change to the store in the same
transaction as the ledger event that records it (see :mod:`coordinator.audit.trail`). A
run's branches, which of them are live, whether it was cancelled and, for a delegation
(one logical handoff, retried as attempts), its target, remote task, states and reason
are computed from those records by :func:`current`, both when the driving process writes
the run's document (:meth:`~coordinator.handoff.run.Run.keep_state`) and when any view
reads it (the CLI, the API, the console), from whatever process drove it. So no view can
show a run other than as its records, and the ledger, say it stands.

A delegation's reason is its first cause, not its last symptom: an attempt refused at
admission after an earlier attempt failed (the retries spent the run's budget) does not
replace that failure (:func:`deciding`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from contracts.handoff import HandoffRecord, HandoffState

S = HandoffState
# The reason the book gives every branch it cancels with its run.
RUN_CANCELLED = "run_cancelled"


def _time(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def ownership_row(
    record: HandoffRecord, question: Any = None, interface: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One branch of the ownership table, from its handoff record (and, when known, the
    question its remote asked and the interface it was sent on)."""
    return {
        "branch": record.attempt_id,
        "target": record.target,
        "owner_during_slice": record.owner_during_slice or record.target,
        "final_owner": record.final_owner,
        "state": record.state.value,
        "reason": record.reason,
        "state_version_seen": record.state_ref.version if record.state_ref else None,
        "lease_expires_at": _time(record.lease_expires_at),
        "attempt": record.attempt,
        "remote_task_id": record.remote_task_id,
        "remote_state": record.remote_state,
        "live": record.live,
        "contract": record.return_contract.name,
        "return_contract": record.return_contract.summary(),
        "remote_question": question,
        "interface": dict(interface) if interface is not None else None,
    }


def ordered(records: Iterable[HandoffRecord], first: Iterable[str] = ()) -> list[HandoffRecord]:
    """Records by handoff (those named in ``first`` in that order, then the others) and
    attempt: a retried handoff's attempts follow one another."""
    place = by_position(first)
    return sorted(records, key=lambda r: place(r.handoff_id, r.attempt))


def by_position(first: Iterable[str]) -> Callable[[str, int], tuple[int, int]]:
    """The sort key of a ``(handoff, attempt)``: the handoffs named in ``first`` in that
    order, the others after them (a stable sort keeps them as they come)."""
    position: dict[str, int] = {}
    for handoff_id in first:
        position.setdefault(handoff_id, len(position))
    return lambda handoff_id, attempt: (position.get(handoff_id, len(position)), attempt)


def refused_retry(record: HandoffRecord) -> bool:
    """An attempt after the first that admission refused: it never left, so it is not
    what happened to the handoff; the attempt before it is."""
    return record.attempt > 1 and record.state is S.REJECTED and record.remote_task_id is None


def deciding(records: list[HandoffRecord]) -> HandoffRecord | None:
    """The attempt that says how the last handoff of ``records`` (ordered) stands: its
    latest, unless that one is a :func:`refused_retry` (then the one before it)."""
    if not records:
        return None
    attempts = [r for r in records if r.handoff_id == records[-1].handoff_id]
    if len(attempts) > 1 and refused_retry(attempts[-1]):
        return attempts[-2]
    return attempts[-1]


def delegation_fields(record: HandoffRecord | None) -> dict[str, Any]:
    """A delegation's one-handoff summary, from its deciding attempt."""
    if record is None:
        return {}
    return {
        "handoff_id": record.handoff_id,
        "target": record.target,
        "skill": record.skill,
        "attempt": record.attempt,
        "remote_task_id": record.remote_task_id,
        "remote_state": record.remote_state,
        "local_state": record.state.value,
        "reason": record.reason,
    }


def current(document: Mapping[str, Any], records: Iterable[HandoffRecord]) -> dict[str, Any]:
    """``document`` (a run's, as stored) with everything about its state computed from
    ``records`` (its handoffs' as stored): branches, live branches, cancelled and, for a
    delegation, its summary. What the document knew of a branch that its record does not
    (the question a remote asked, the interface) is kept."""
    known = {
        str(branch.get("branch")): branch
        for branch in document.get("branches") or []
        if isinstance(branch, dict)
    }
    by_handoff = [str(branch).rsplit("/", 1)[0] for branch in known]
    records = ordered(records, by_handoff)
    stored = {record.attempt_id for record in records}
    rows = {
        record.attempt_id: ownership_row(
            record,
            known.get(record.attempt_id, {}).get("remote_question"),
            known.get(record.attempt_id, {}).get("interface"),
        )
        for record in records
    }
    # a branch with no record of its own (a local agent's) keeps its place among them
    rows.update({name: branch for name, branch in known.items() if name not in stored})
    rows = {name: rows[name] for name in branch_order(rows, by_handoff)}
    derived: dict[str, Any] = {
        **document,
        "branches": list(rows.values()),
        "live_branches": [r.attempt_id for r in records if r.live]
        + [str(b) for b in document.get("live_branches") or [] if b not in stored],
        "cancelled": bool(document.get("cancelled")) or cancelled(records),
    }
    if document.get("kind") == "delegation":
        derived.update(delegation_fields(deciding(records)))
    return derived


def branch_order(names: Iterable[str], first: Iterable[str]) -> list[str]:
    """Branch names (``handoff/attempt``) in the order :func:`ordered` gives records."""
    place = by_position(first)

    def key(name: str) -> tuple[int, int]:
        handoff_id, _, attempt = name.rpartition("/")
        return place(handoff_id, int(attempt) if attempt.isdigit() else 0)

    return sorted(names, key=key)


def cancelled(records: Iterable[HandoffRecord]) -> bool:
    """Whether the records show the run cancelled (before its document may say so)."""
    return any(r.state is S.CANCELLED and r.reason == RUN_CANCELLED for r in records)


def state(document: Mapping[str, Any]) -> str:
    """One word for a derived run: ``cancelled``, ``live`` while a branch is in flight,
    else the state its deciding attempt (a delegation) or its last branch ended in."""
    if document.get("cancelled"):
        return "cancelled"
    if document.get("live_branches"):
        return "live"
    if document.get("kind") == "delegation" and document.get("local_state"):
        return str(document["local_state"])
    branches = document.get("branches") or []
    return str(branches[-1]["state"]) if branches else "empty"


def reason(document: Mapping[str, Any]) -> str | None:
    """A derived run's reason: a delegation's first cause, else its last branch's."""
    if document.get("kind") == "delegation" and document.get("reason"):
        return str(document["reason"])
    reasons = [b["reason"] for b in document.get("branches") or [] if b.get("reason")]
    return str(reasons[-1]) if reasons else None
