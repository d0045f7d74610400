"""What each console page shows, built from the service's own documents.

Every figure comes from :class:`~coordinator.service.facade.CoordinatorService`, the same
calls the API and the CLI make: run summaries and their paging (``runs``), the run's
document (``run``), the ledger (``audit_*``), agents and held cards (``agents``,
``agent_detail``, ``pending``). Nothing here decides a state, a verdict or a diff; it
only arranges what those documents say for a template. Remote text stays text: it is
passed on as strings and escaped where the template prints it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agent_cards.trusted import TrustedKeys
from coordinator.audit.log.events import StoredEvent
from coordinator.audit.receipts import records_receipt
from coordinator.console.receipts import ReceiptView, receipt_view
from coordinator.console.settings import ConsoleSettings
from coordinator.console.timeline import timeline
from coordinator.handoff.run_state import state as summary_state
from coordinator.remote.cards.registry import Registry
from coordinator.service.agent_views import diff_lines
from coordinator.service.api_models import RunDocument
from coordinator.service.artifact_content import shown
from coordinator.service.facade import CoordinatorService
from coordinator.service.run_list import STATES, RunQuery, age

STATE_FILTERS = ("", *STATES, "ACCEPTED", "REJECTED", "RETURNED_UNVERIFIED", "FAILED")
PAGE_SIZE = 20
CONTENT_CHARS = 20_000


def run_rows(service: CoordinatorService, query: RunQuery) -> dict[str, Any]:
    """One page of run summaries, each with its age; the JSON the runs page polls."""
    page = service.runs(query).model_dump()
    now = datetime.now(UTC)
    rows = [{**run, "age": age(run["started_at"], now)} for run in page["runs"]]
    return {"runs": rows, "next_cursor": page["next_cursor"]}


def runs_page(service: CoordinatorService, query: RunQuery) -> dict[str, Any]:
    return {
        **run_rows(service, query),
        "query": query,
        "state_filters": STATE_FILTERS,
    }


def pinned_keys(service: CoordinatorService) -> dict[str, TrustedKeys]:
    """The keys pinned for each registered agent (to check their receipts with)."""
    return {
        agent.name: TrustedKeys.from_json(agent.pinned_jwks)
        for agent in Registry(service.ws.data).agents()
        if agent.pinned_jwks.get("keys")
    }


def receipts_of(
    events: list[StoredEvent], pinned: dict[str, TrustedKeys]
) -> dict[int, ReceiptView]:
    """Each receipt event of the run (by its seq), decoded and checked."""
    return {
        event.seq: receipt_view(event.data, pinned)
        for event in events
        if records_receipt(event.event_type, event.data)
    }


def run_state(document: dict[str, Any]) -> dict[str, Any]:
    """What the run page polls: the run's state and each branch's."""
    summary = {"run_id": document["run_id"], **_state_of(document)}
    summary["branches"] = [
        {name: branch.get(name) for name in ("branch", "state", "remote_state", "reason", "live")}
        for branch in document.get("branches") or []
    ]
    return summary


def _state_of(document: dict[str, Any]) -> dict[str, Any]:
    state = summary_state(document)
    return {"state": state, "live": state == "live"}


def audit_of(events: list[StoredEvent], verified: dict[str, Any] | None) -> dict[str, Any]:
    """The audit state of the run's events: the chain's verification (asked for: it reads
    the whole ledger) covers them when it reached past the run's last event."""
    seqs = [event.seq for event in events]
    last = max(seqs) if seqs else None
    covered = (
        verified is not None
        and bool(verified["ok"])
        and last is not None
        and verified["last_seq"] >= last
    )
    return {
        "events": len(events),
        "first_seq": min(seqs) if seqs else None,
        "last_seq": last,
        "verified": covered,
        "report": verified,
    }


def run_page(
    service: CoordinatorService,
    settings: ConsoleSettings,
    run_id: str,
    verified: dict[str, Any] | None = None,
) -> dict[str, Any]:
    # as the API answers it: every field the models name is there, defaulted if need be
    document = RunDocument.model_validate(service.run(run_id)).model_dump()
    events = service.ws.ledger().events(run_id)
    lanes, rows = timeline(document, events)
    artifacts = [
        {**artifact, "shown": shown(artifact.get("content"), CONTENT_CHARS)}
        for artifact in document.get("artifacts") or []
    ]
    trace_id = document.get("trace_id")
    return {
        "run": document,
        **_state_of(document),
        "lanes": lanes,
        "rows": rows,
        "receipts": receipts_of(events, pinned_keys(service)) if events else {},
        "artifacts": artifacts,
        "budget": document.get("budget"),
        "trace_id": trace_id,
        "trace_url": settings.trace_url(trace_id),
        "audit": audit_of(events, verified),
    }


def agents_page(service: CoordinatorService) -> dict[str, Any]:
    agents = []
    for view in service.agents():
        detail = service.agent_detail(view.name).model_dump()
        held = service.agent(view.name).pending_card or {}
        pending = detail["pending"]
        agents.append(
            {
                **detail,
                "held_version": held.get("version") if pending else None,
                "diff_lines": diff_lines(pending["diff"]) if pending else [],
            }
        )
    return {"agents": agents}


def audit_page(service: CoordinatorService, verified: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "verified": verified,
        "head": service.latest_tree_head(),
        "chain": dict(zip(("seq", "hash"), service.ws.ledger().head(), strict=True)),
        "runs": run_rows(service, RunQuery(limit=PAGE_SIZE))["runs"],
    }
