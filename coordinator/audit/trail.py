"""The audit trail: every cross-service fact of a run, sent to the ledger as it happens.

:class:`AuditTrail` is what the handoff book, the dispatch path and the run call; it turns
a fact into an :class:`~coordinator.audit.ledger.AuditEvent` with the run, handoff, attempt,
actor, remote task id and trace id filled in. Without a ledger it keeps the events in
memory (tests, dry runs); with one, each is appended when it happens.

:func:`reconstruct` is the other direction: it rebuilds a run (ownership table, branches,
leases, artifacts with their admission, budget, effects, final disposition) from the
ledger's events alone, which is what ``federation audit show`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection

from contracts.handoff import HandoffRecord
from coordinator.audit.ledger import AuditEvent, Ledger, StoredEvent
from coordinator.storage.runs import RunStore


class AuditTrail:
    """Facts of a run on their way to the ledger.

    Events are gathered and appended in one transaction by :meth:`flush`, which the
    dispatch path calls before anything crosses to another service (and at the end of
    each step), so no fact about a message can be missing from the ledger once the
    message has left. Buffering turns a dozen single-event transactions per handoff into
    a few batched ones. A run store whose writes are deferred (:meth:`carry`) is written
    in that same transaction, so the run's rows and its facts land together.
    """

    FLUSH_AT = 64

    def __init__(self, ledger: Ledger | None = None, actor: str = "coordinator") -> None:
        self.ledger = ledger
        self.actor = actor
        self.kept: list[AuditEvent] = []
        self.pending: list[AuditEvent] = []
        self._stores: list[RunStore] = []

    def carry(self, store: RunStore) -> None:
        """Defer ``store``'s writes to this trail's flushes (when both share a database)."""
        if self.ledger is None or store.engine is not self.ledger.engine:
            return
        if store not in self._stores:
            store.defer_writes()
            self._stores.append(store)

    def flush(self) -> None:
        if self.ledger is None:
            return
        stores = [store for store in self._stores if store.has_pending]
        if not self.pending and not stores:
            return
        events, self.pending = self.pending, []

        def rows(connection: Connection) -> None:
            for store in stores:
                store.write_pending(connection)

        self.ledger.append_many_with(events, rows if stores else None)

    def emit(
        self,
        event_type: str,
        *,
        run_id: str | None = None,
        record: HandoffRecord | None = None,
        trace_id: str | None = None,
        actor: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        event = AuditEvent(
            event_type=event_type,
            actor=actor or self.actor,
            data=dict(data or {}),
            run_id=run_id or (record.run_id if record else None),
            handoff_id=record.handoff_id if record else None,
            attempt=record.attempt if record else None,
            remote_task_id=record.remote_task_id if record else None,
            trace_id=trace_id,
        )
        if self.ledger is None:
            self.kept.append(event)
            return
        self.pending.append(event)
        if len(self.pending) >= self.FLUSH_AT:
            self.flush()


def contract_of(record: HandoffRecord) -> dict[str, Any]:
    """The handoff contract as recorded at admission (no events, no remote observations)."""
    return record.model_dump(
        mode="json",
        exclude={"events", "remote_task_id", "remote_state", "state", "version", "reason"},
    )


# --- reading a run back from the ledger ---------------------------------------------------


def reconstruct(events: Iterable[StoredEvent]) -> dict[str, Any]:
    """Rebuild one run's operator view from its ledger events alone."""
    view: dict[str, Any] = {
        "run_id": None,
        "owner": None,
        "ownership_path": [],
        "authority": None,
        "branches": {},
        "artifacts": [],
        "budget": [],
        "grants": [],
        "effects": 0,
        "cancelled": False,
        "disposition": None,
        "events": 0,
    }
    for event in events:
        view["events"] += 1
        view["run_id"] = view["run_id"] or event.run_id
        _apply(view, event)
    view["branches"] = list(view["branches"].values())
    view["live_branches"] = [b["branch"] for b in view["branches"] if b["state"] in _LIVE]
    return view


_LIVE = {"ADMITTED", "DISPATCHED", "RUNNING", "QUARANTINED", "RETURNED"}


def _branch(view: dict[str, Any], event: StoredEvent) -> dict[str, Any]:
    key = f"{event.handoff_id}/{event.attempt}"
    branches: dict[str, dict[str, Any]] = view["branches"]
    return branches.setdefault(
        key,
        {
            "branch": key,
            "target": None,
            "owner_during_slice": None,
            "state": "PROPOSED",
            "reason": None,
            "state_version_seen": None,
            "lease_expires_at": None,
            "attempt": event.attempt,
            "remote_task_id": None,
            "remote_state": None,
        },
    )


def _apply(view: dict[str, Any], event: StoredEvent) -> None:
    data = event.data
    kind = event.event_type
    if kind == "run.started":
        view["owner"] = data.get("owner")
        view["ownership_path"] = [data.get("owner")]
        view["authority"] = data.get("authority")
    elif kind == "ownership.transferred":
        view["owner"] = data.get("to")
        view["ownership_path"].append(data.get("to"))
    elif kind == "run.cancelled":
        view["cancelled"] = True
    elif kind == "run.disposition":
        view["disposition"] = data
    elif kind in ("handoff.admitted", "handoff.denied", "handoff.local"):
        branch = _branch(view, event)
        contract = data.get("contract", {})
        branch["target"] = contract.get("target")
        branch["owner_during_slice"] = contract.get("owner_during_slice")
        state_ref = contract.get("state_ref") or {}
        branch["state_version_seen"] = state_ref.get("version")
        branch["lease_expires_at"] = contract.get("lease_expires_at")
        budget = contract.get("budget") or {}
        view["effects"] += int(budget.get("effects", 0))
        branch["state"] = data.get("state", branch["state"])
        branch["reason"] = data.get("reason")
    elif kind == "handoff.transition":
        branch = _branch(view, event)
        branch["state"] = data.get("to")
        branch["reason"] = data.get("reason")
    elif kind == "remote.state_observed":
        branch = _branch(view, event)
        branch["remote_state"] = data.get("remote_state")
        branch["remote_task_id"] = event.remote_task_id
    elif kind == "lease.renewed":
        _branch(view, event)["lease_expires_at"] = data.get("lease_expires_at")
    elif kind == "grant.minted":
        view["grants"].append({"branch": f"{event.handoff_id}/{event.attempt}", **data})
    elif kind.startswith("artifact.") and kind != "artifact.received":
        view["artifacts"].append(
            {
                "branch": f"{event.handoff_id}/{event.attempt}",
                "decision": kind.split(".", 1)[1],
                **data,
            }
        )
    elif kind == "budget.units":
        view["budget"].append({"branch": f"{event.handoff_id}/{event.attempt}", **data})


def render_reconstruction(view: dict[str, Any]) -> str:
    """``audit show``: the run as the ledger alone tells it."""
    from coordinator.handoff.documents import OWNERSHIP_COLUMNS, UNIT_COLUMNS, render_table

    disposition = view.get("disposition") or {}
    lines = [
        f"run {view['run_id']} (from {view['events']} ledger events): owner {view['owner']} "
        f"(path {' -> '.join(str(o) for o in view['ownership_path'])})"
        f"{'; CANCELLED' if view['cancelled'] else ''}",
        f"authority: {view['authority']}",
        "",
        "ownership by branch:",
        render_table(view["branches"], OWNERSHIP_COLUMNS),
        "",
        "grants:",
        render_table(view["grants"], ["branch", "jti", "scope", "aud", "exp", "claims_digest"])
        if view["grants"]
        else "(none)",
        "",
        "artifacts:",
        render_table(view["artifacts"], ["branch", "decision", "reason", "content_hash", "size"])
        if view["artifacts"]
        else "(none received)",
        "",
        "budget:",
        render_table(view["budget"], UNIT_COLUMNS),
        f"effects granted: {view['effects']}",
        "",
        "pending: " + (", ".join(view["live_branches"]) or "nothing"),
        "disposition: "
        + (
            f"{disposition.get('status')} - {disposition.get('summary')}"
            if disposition
            else "none recorded"
        ),
    ]
    return "\n".join(lines)
