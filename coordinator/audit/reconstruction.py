"""A run read back from the ledger alone: what ``federation audit show`` prints.

:func:`reconstruct` rebuilds one run's operator view (ownership table, branches, leases,
artifacts with their admission, budget, effects, final disposition) from its events, with
no help from the run store, so the two can be compared.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coordinator.audit.ledger import StoredEvent
from coordinator.audit.log.events import admission_in, timestamp, transition_in, units_in
from coordinator.audit.receipts import grant_recorded


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
        # token exchanges (delegation chains): every hop granted or refused
        "hops": [],
        "effects": 0,
        "cancelled": False,
        "cancellation": None,
        "disposition": None,
        "events": 0,
    }
    for event in events:
        view["events"] += 1
        view["run_id"] = view["run_id"] or event.run_id
        view["trace_id"] = view.get("trace_id") or event.trace_id
        _apply(view, event)
    view["branches"] = list(view["branches"].values())
    view["live_branches"] = [b["branch"] for b in view["branches"] if b["state"] in _LIVE]
    return view


_LIVE = {"ADMITTED", "DISPATCHED", "RUNNING", "QUARANTINED", "RETURNED"}
# What an event carries beside its own facts: the move it caused, the units it moved, the
# receipt a verdict was given with (and its kid), the admission and the grant a dispatch
# went out with.
_CARRIED = frozenset({"transition", "units", "receipt", "kid", "grant", "admission"})


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
    """One event's facts: the admission it records (a dispatch carries its own), its own,
    then the grant, the move of its handoff and the budget units it carries (in either of
    the forms the ledger has held: see ``units_in``)."""
    admission = admission_in(event.event_type, event.data)
    if admission is not None:
        _contracted(view, event, admission)
    _apply_facts(view, event)
    key = f"{event.handoff_id}/{event.attempt}"
    grant = grant_recorded(event.event_type, event.data)
    if grant is not None:
        view["grants"].append({"branch": key, **grant})
    moved = transition_in(event.event_type, event.data)
    if moved is not None:
        branch = _branch(view, event)
        branch["state"] = moved.get("to")
        branch["reason"] = moved.get("reason")
    units = units_in(event.event_type, event.data)
    view["budget"] += [{"branch": key, **unit} for unit in units]


def _contracted(view: dict[str, Any], event: StoredEvent, data: dict[str, Any]) -> None:
    """A branch as its contract was admitted, denied or kept local."""
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


def _apply_facts(view: dict[str, Any], event: StoredEvent) -> None:
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
        view["cancellation"] = {
            "by": data.get("by") or "-",
            "reason": data.get("why") or data.get("reason") or "-",
            "at": timestamp(event.recorded_at),
        }
    elif kind == "run.disposition":
        view["disposition"] = data
    elif kind in ("handoff.denied", "handoff.local"):
        _contracted(view, event, data)
    elif kind == "remote.state_observed":
        branch = _branch(view, event)
        branch["remote_state"] = data.get("remote_state")
        branch["remote_task_id"] = event.remote_task_id
    elif kind == "message.dispatched" and data.get("interface"):
        _branch(view, event)["interface"] = data.get("interface")
    elif kind == "lease.renewed":
        _branch(view, event)["lease_expires_at"] = data.get("lease_expires_at")
    elif kind.startswith("artifact.") and kind != "artifact.received":
        view["artifacts"].append(
            {
                "branch": f"{event.handoff_id}/{event.attempt}",
                "decision": kind.split(".", 1)[1],
                **{name: value for name, value in data.items() if name not in _CARRIED},
            }
        )
    elif kind in ("delegation.exchanged", "delegation.exchange_refused"):
        view["hops"].append({"granted": kind == "delegation.exchanged", **data})
