"""``federation delegate`` reports as it goes: a line per step, on standard error, and
its exit status at the end (:func:`exit_status`).

The first line names the run (so ``federation cancel RUN`` can be typed in another shell
at once); then one line per step of the handoff as its driver records it: dispatched,
the remote task and each state it is seen in, each change of the handoff's state, each
retry with its cause and wait, a refusal, a cancel, and how the run ended.
The lines are the run's audit events as they are emitted (:class:`AuditTrail`'s
listener), so they say what the ledger will say.

Standard output keeps the delegation's one result (its text, or with ``--json`` one JSON
document), so a script's ``| jq`` still reads one document; with ``--json`` the progress
lines are JSON objects too (one a line: ``event``, ``run_id``, ``attempt``,
``remote_task_id``, the step's fields and ``text``, the human line).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from coordinator.audit.log.events import TRANSITION_EVENT, transition_in

if TYPE_CHECKING:
    from coordinator.audit.log.events import AuditEvent

# The fields of each reported event's data that its line shows.
SHOWN = {
    "run.started": (),
    "message.dispatched": ("endpoint",),
    "remote.state_observed": ("remote_state",),
    "handoff.transition": ("from", "to", "reason"),
    "handoff.retry_scheduled": ("cause", "delay_seconds"),
    "handoff.retries_stopped": ("cause", "first_cause", "attempts"),
    "handoff.denied": ("reason",),
    "handoff.ended_elsewhere": ("state", "reason"),
    "run.cancelled": ("by", "why"),
    "cancel.acknowledged": ("remote_state",),
    "run.disposition": ("status", "summary"),
}


def text_of(event: AuditEvent) -> str:
    """The human line for one reported event."""
    d: Mapping[str, Any] = event.data
    attempt = f"attempt {event.attempt}"
    match event.event_type:
        case "run.started":
            return f"run {event.run_id} started (cancel: federation cancel {event.run_id})"
        case "message.dispatched":
            return f"{attempt} dispatched to {d.get('endpoint')}"
        case "remote.state_observed":
            return f"{attempt}: remote task {event.remote_task_id} is {d.get('remote_state')}"
        case "handoff.transition":
            return f"{attempt}: {d.get('from')} -> {d.get('to')} ({d.get('reason')})"
        case "handoff.retry_scheduled":
            delay = float(d.get("delay_seconds") or 0.0)
            return f"{attempt} failed ({d.get('cause')}); retrying in {delay:.2f} s"
        case "handoff.retries_stopped":
            return (
                f"retries stopped after {d.get('attempts')} attempts: {d.get('cause')} "
                f"(first cause: {d.get('first_cause')})"
            )
        case "handoff.denied":
            return f"{attempt} refused at admission ({d.get('reason')})"
        case "handoff.ended_elsewhere":
            return f"{attempt} ended by another process: {d.get('state')} ({d.get('reason')})"
        case "run.cancelled":
            return f"run cancelled by {d.get('by') or '-'}: {d.get('why') or '-'}"
        case "cancel.acknowledged":
            return f"{attempt}: cancel acknowledged, remote task is {d.get('remote_state')}"
        case _:
            return f"ended {str(d.get('status', '')).upper()}: {d.get('summary')}"


def _said_by_dispatch(event: AuditEvent) -> bool:
    """The move to DISPATCHED: the dispatch line says it."""
    return event.event_type == TRANSITION_EVENT and event.data.get("to") == "DISPATCHED"


def steps_of(event: AuditEvent) -> list[AuditEvent]:
    """The reported steps one event records: itself, if reported, and the move of its
    handoff it carries (an artifact's verdict carries the move it caused), as the
    ``handoff.transition`` it stands for."""
    steps = [event] if event.event_type in SHOWN else []
    moved = transition_in(event.event_type, event.data)
    if moved is not None and event.event_type != TRANSITION_EVENT:
        steps.append(replace(event, event_type=TRANSITION_EVENT, data=moved))
    return [step for step in steps if not _said_by_dispatch(step)]


def reporter(as_json: bool, out: TextIO | None = None) -> Callable[[AuditEvent], None]:
    """A listener printing each reported step as it happens (others are not shown)."""
    stream = out or sys.stderr

    def report(event: AuditEvent) -> None:
        for step in steps_of(event):
            print(_line(step, as_json), file=stream, flush=True)

    return report


def _line(event: AuditEvent, as_json: bool) -> str:
    """One step's line: the human text, or a JSON object holding it."""
    text = text_of(event)
    if not as_json:
        return f"federation: {text}"
    fields = {name: event.data.get(name) for name in SHOWN[event.event_type]}
    return json.dumps(
        {
            "event": event.event_type,
            "at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "run_id": event.run_id,
            "attempt": event.attempt,
            "remote_task_id": event.remote_task_id,
            **fields,
            "text": text,
        },
        default=str,
    )


def exit_status(document: Mapping[str, Any], asked: int) -> int:
    """The delegation's exit status (the CLI's exit-code table): 130 when a Ctrl-C
    cancelled it (said on standard error), ``asked`` when the remote asked for input, 3
    when the send never reached the agent after its retries (unavailable), 0 when
    accepted, else 1."""
    from coordinator.dispatch.delegate import INTERRUPT_OPERATOR
    from coordinator.dispatch.retry import UNAVAILABLE

    cancellation = document.get("cancellation") or {}
    if cancellation.get("by") == INTERRUPT_OPERATOR:
        print(
            f"federation: interrupted: cancelled run {document['run_id']}; remote task "
            f"{document.get('remote_task_id') or '-'} is {document.get('remote_state') or '-'}",
            file=sys.stderr,
        )
        return 130
    if document.get("remote_question"):
        return asked
    sent, _, cause = str(document.get("reason") or "").partition(":")
    if document.get("local_state") == "FAILED" and sent == "dispatch_failed":
        return 3 if cause in UNAVAILABLE else 1
    return 0 if document.get("local_state") == "ACCEPTED" else 1
