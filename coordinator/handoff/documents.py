"""The operator's view of a run, built from its records alone (never from conversation text).

It answers: who owns the run, which branches are live, what state version each saw, when
their leases end, which artifacts were admitted and why the others were not, how the
budget was spent, and what is still pending. The same document is stored in the data
directory, printed by ``federation run show`` and shown per case by the demo.
"""

from __future__ import annotations

from typing import Any

from coordinator.handoff.book import ArtifactRecord, BudgetEntry
from coordinator.handoff.run import Run


def _time(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def ownership_rows(run: Run) -> list[dict[str, Any]]:
    rows = []
    for record in run.handoffs.values():
        rows.append(
            {
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
            }
        )
    return rows


def artifact_row(artifact: ArtifactRecord) -> dict[str, Any]:
    return {
        "branch": f"{artifact.handoff_id}/{artifact.attempt}",
        "decision": artifact.decision.value,
        "reason": artifact.reason,
        "content_hash": artifact.content_hash,
        "size": artifact.size,
        "received_at": _time(artifact.received_at),
        "content": artifact.content,
    }


def unit_row(entry: BudgetEntry) -> dict[str, Any]:
    return {
        "branch": f"{entry.handoff_id}/{entry.attempt}",
        "kind": entry.kind.value,
        "actions": entry.actions,
        "context_units": entry.context_units,
        "effects": entry.effects,
        "reason": entry.reason,
    }


def run_document(run: Run, **extra: Any) -> dict[str, Any]:
    book = run.book
    remaining = book.remaining()
    rows = ownership_rows(run)
    return {
        "run_id": run.run_id,
        "owner": run.owner,
        "ownership_path": list(run.ownership_path),
        "cancelled": book.cancelled,
        "state_version": book.state_version,
        "branches": rows,
        "live_branches": [row["branch"] for row in rows if row["live"]],
        "artifacts": [artifact_row(a) for a in book.artifacts],
        "budget": {
            "limit": book.parent.remaining.model_dump(),
            "remaining": remaining.model_dump(),
            "ledger": [unit_row(u) for u in book.units],
        },
        "refusals": list(run.refusals),
        **extra,
    }


def render_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    cells = [[str(row.get(c) if row.get(c) is not None else "-") for c in columns] for row in rows]
    widths = [
        max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)
    ]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


OWNERSHIP_COLUMNS = [
    "branch",
    "target",
    "owner_during_slice",
    "state",
    "reason",
    "state_version_seen",
    "lease_expires_at",
    "attempt",
    "remote_task_id",
    "remote_state",
]
ARTIFACT_COLUMNS = ["branch", "decision", "reason", "content_hash", "size"]
UNIT_COLUMNS = ["branch", "kind", "actions", "context_units", "effects", "reason"]


def render_document(document: dict[str, Any]) -> str:
    """The ``run show`` text: ownership table, artifact view, budget ledger, pending."""
    lines = [
        f"run {document['run_id']}: owner {document['owner']} "
        f"(path {' -> '.join(document['ownership_path'])}); state version "
        f"{document['state_version']}{'; CANCELLED' if document['cancelled'] else ''}",
        "",
        "ownership by branch:",
        render_table(document["branches"], OWNERSHIP_COLUMNS),
        "",
        "artifacts:",
        render_table(document["artifacts"], ARTIFACT_COLUMNS)
        if document["artifacts"]
        else "(none received)",
        "",
        f"budget: limit {document['budget']['limit']}, remaining {document['budget']['remaining']}",
        render_table(document["budget"]["ledger"], UNIT_COLUMNS),
        "",
        "pending: " + (", ".join(document["live_branches"]) or "nothing"),
    ]
    return "\n".join(lines)
