"""A run's ledger events drawn as a sequence across lanes: the coordinator, then each agent.

Pure: it takes the run's document (for which branch went to which target) and its
ledger events, and answers lanes and rows for the template. Each row is one event, in
ledger order, placed in one lane or drawn as an arrow between the coordinator and an
agent: a dispatch and a CancelTask go out, a remote state and what a remote asked come
back; admission, grants, transitions, budget units and return admission stay in the
coordinator's lane. Details are short text; whatever in them came from a remote is
escaped by the template like everything else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.audit.log.events import (
    TRANSITION_EVENT,
    UNITS_EVENT,
    StoredEvent,
    transition_in,
    units_in,
)
from coordinator.audit.receipts import GRANT_EVENT, grant_recorded

COORDINATOR = "coordinator"
DETAIL_CHARS = 160
OUTBOUND = frozenset({"message.dispatched", "cancel.sent"})
INBOUND = frozenset({"remote.state_observed", "cancel.acknowledged", "remote.asked"})
AT_TARGET = frozenset({"handoff.local"})
HOPS = frozenset({"delegation.exchanged", "delegation.exchange_refused"})


@dataclass(frozen=True)
class Cell:
    """One cell of a row: ``span`` lanes wide; ``kind`` is empty, ``event`` or ``arrow``."""

    span: int
    kind: str
    direction: str = ""


@dataclass(frozen=True)
class Row:
    seq: int
    at: str
    event_type: str
    lane: str
    branch: str | None
    detail: str
    cells: tuple[Cell, ...]
    category: str


def lanes_of(document: dict[str, Any]) -> list[str]:
    lanes = [COORDINATOR]
    for branch in document.get("branches") or []:
        target = branch.get("target")
        if isinstance(target, str) and target not in lanes:
            lanes.append(target)
    return lanes


def targets_by_handoff(document: dict[str, Any]) -> dict[str, str]:
    found = {}
    for branch in document.get("branches") or []:
        handoff_id = str(branch.get("branch", "")).rpartition("/")[0]
        if handoff_id and isinstance(branch.get("target"), str):
            found[handoff_id] = branch["target"]
    return found


def category(event_type: str) -> str:
    """A word for the event's colour in the timeline."""
    if event_type in OUTBOUND:
        return "dispatch"
    if event_type in INBOUND:
        return "remote"
    head = event_type.partition(".")[0]
    known = {"handoff": "admission", "grant": "grant", "artifact": "return", "budget": "budget"}
    known["delegation"] = "grant"  # a hop of a delegation chain (token exchange)
    return known.get(head, "ledger")


def detail(event: StoredEvent) -> str:
    data = event.data
    units = [units_detail(unit) for unit in units_in(event.event_type, data)]
    moved = transition_in(event.event_type, data)
    carried = [] if moved is None else [transition_detail(moved)]
    grant = grant_recorded(event.event_type, data)
    if grant is not None and event.event_type != GRANT_EVENT:  # carried by a dispatch
        carried.insert(0, grant_detail(grant))
    if event.event_type == TRANSITION_EVENT:
        text, carried = carried[0], []
    elif event.event_type in ("remote.state_observed", "cancel.acknowledged"):
        text = str(data.get("remote_state"))
    elif event.event_type == UNITS_EVENT:
        text, units = f"{units[0]} ({data.get('reason')})", []
    elif event.event_type == GRANT_EVENT:
        text = grant_detail(data)
    elif event.event_type in HOPS:
        text = hop_detail(event.event_type, data)
    elif event.event_type.startswith("artifact."):
        text = f"{data.get('contract')}: {data.get('reason')}"
    elif event.event_type in ("message.dispatched", "cancel.sent"):
        text = str(data.get("endpoint"))
    else:
        hidden = ("contract", "authority", "units", "transition")
        shown = {k: v for k, v in data.items() if k not in hidden}
        text = json.dumps(shown, ensure_ascii=False, sort_keys=True, default=str)
    text = "; ".join((text, *carried, *units))
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def grant_detail(grant: Mapping[str, Any]) -> str:
    """A token minted: what it allows, and its id."""
    return f"scope {grant.get('scope')}, jti {grant.get('jti')}"


def transition_detail(moved: dict[str, Any]) -> str:
    """A handoff's move: from, to and why."""
    return f"{moved.get('from')} -> {moved.get('to')} ({moved.get('reason')})"


def units_detail(unit: dict[str, Any]) -> str:
    """One budget unit: its kind and what it counts."""
    return f"{unit.get('kind')}: {counts(unit)}"


def counts(budget: dict[str, Any]) -> str:
    """A budget's actions, context units and effects, as the timeline shows them."""
    return ", ".join(f"{k} {budget.get(k)}" for k in ("actions", "context_units", "effects"))


def hop_detail(event_type: str, data: dict[str, Any]) -> str:
    """One hop of a delegation chain: granted (to whom, how deep, what) or refused (why)."""
    if event_type == "delegation.exchanged":
        return (
            f"child token to {data.get('to')} (depth {data.get('depth')}): "
            f"scope {data.get('scope')}; {counts(data.get('budget') or {})}; "
            f"parent {data.get('parent_jti')}"
        )
    return f"exchange refused ({data.get('reason')}) from parent {data.get('parent_jti')}"


def cells_for(lanes: Sequence[str], lane: str, event_type: str) -> tuple[Cell, ...]:
    index = lanes.index(lane)
    if index == 0 or (event_type not in OUTBOUND and event_type not in INBOUND):
        return (
            *(Cell(1, "empty") for _ in range(index)),
            Cell(1, "event"),
            *(Cell(1, "empty") for _ in range(len(lanes) - index - 1)),
        )
    direction = "out" if event_type in OUTBOUND else "in"
    return (Cell(index + 1, "arrow", direction), *(Cell(1, "empty") for _ in lanes[index + 1 :]))


def timeline(
    document: dict[str, Any], events: Sequence[StoredEvent]
) -> tuple[list[str], list[Row]]:
    """The lanes and one row per ledger event of the run."""
    lanes = lanes_of(document)
    targets = targets_by_handoff(document)
    rows = []
    for event in events:
        target = targets.get(event.handoff_id or "")
        at_target = event.event_type in OUTBOUND | INBOUND | AT_TARGET
        lane = target if target is not None and at_target else COORDINATOR
        branch = f"{event.handoff_id}/{event.attempt}" if event.handoff_id else None
        rows.append(
            Row(
                seq=event.seq,
                at=event.recorded_at.strftime("%H:%M:%S.%f")[:-3],
                event_type=event.event_type,
                lane=lane,
                branch=branch,
                detail=detail(event),
                cells=cells_for(lanes, lane, event.event_type),
                category=category(event.event_type),
            )
        )
    return lanes, rows
