"""``federation runs`` and ``GET /v1/runs``: one line a run, newest first, filtered and paged.

A summary is derived from the run's stored document and its handoff records, by the rule
every view uses (:mod:`coordinator.handoff.run_state`): its state (``live`` while a
branch is in flight, ``cancelled``, else the state it ended in), the targets it delegated
to, its reason (a delegation's first cause) and when it started. Pages are keyed on
``(created_at, run_id)``, so a run recorded while an operator pages never shifts a page.
The cursor is that key, base64url-encoded: opaque to callers, checked when it comes back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent_cards.jws import b64url_decode, b64url_encode
from contracts import strict_json
from coordinator.errors import UsageError

if TYPE_CHECKING:  # the CLI's --server reads a page's documents with no database at hand
    from coordinator.storage.runs import RunStore

MAX_LIMIT = 500
STATES = ("live", "cancelled", "finished")
# What a run's state can be besides those: a handoff state (its last branch's), or empty.
EMPTY = "empty"


@dataclass(frozen=True)
class RunQuery:
    """Which runs to list: ``state`` is live, cancelled, finished or a handoff state."""

    state: str | None = None
    since: str | None = None
    limit: int = 50
    cursor: str | None = None


def summary(created_at: str, document: dict[str, Any]) -> dict[str, Any]:
    """One line for a run whose document is derived from its records (see
    :func:`coordinator.handoff.run_state.current`)."""
    from coordinator.handoff import run_state  # the --server CLI prints summaries only

    branches = document.get("branches") or []
    targets = sorted({str(b["target"]) for b in branches if b.get("target")})
    return {
        "run_id": document["run_id"],
        "kind": document.get("kind"),
        "owner": document.get("owner"),
        "state": run_state.state(document),
        "started_at": created_at,
        "targets": targets,
        "reason": run_state.reason(document),
        "branches": len(branches),
        "live_branches": len(document.get("live_branches") or []),
        "cancelled": bool(document.get("cancelled")),
    }


def known_states() -> list[str]:
    """Every ``state`` a query may name (any case)."""
    from contracts.handoff import HandoffState  # the CLI reads pages without it

    handoff_states = (state.value.lower() for state in HandoffState)
    return list(dict.fromkeys([*STATES, EMPTY, *handoff_states]))


def check_state(state: str | None) -> None:
    """Refuse a state no run can be in (``bad_state``): a typo would list nothing."""
    if state is not None and state.lower() not in known_states():
        raise UsageError(
            f"no run can be in state {state!r}; states: {', '.join(known_states())}",
            "bad_state",
        )


def matches(state: str | None, row: dict[str, Any]) -> bool:
    if state is None:
        return True
    if state == "finished":
        return row["state"] not in ("live", "cancelled")
    return bool(row["state"].lower() == state.lower())


def page(store: RunStore, query: RunQuery) -> tuple[list[dict[str, Any]], str | None]:
    """One page of summaries and the cursor of the next (``None`` at the end)."""
    if not 1 <= query.limit <= MAX_LIMIT:
        raise UsageError(f"limit must be between 1 and {MAX_LIMIT}", "bad_limit")
    check_state(query.state)
    from coordinator.handoff import run_state

    since = query_since(query.since) if query.since is not None else None
    key = decode_cursor(query.cursor) if query.cursor else None
    found: list[dict[str, Any]] = []
    while True:
        rows = store.run_page(query.limit, key, since)
        for created_at, run_id, document in rows:
            key = (created_at, run_id)
            row = summary(created_at, run_state.current(document, store.run_records(run_id)))
            if matches(query.state, row):
                found.append(row)
                if len(found) == query.limit:
                    return found, encode_cursor(key)
        if len(rows) < query.limit:
            return found, None


def age(started_at: str, now: datetime) -> str:
    """How long ago, in the largest whole unit: ``42s``, ``5m``, ``3h``, ``2d``."""
    seconds = int((now - datetime.fromisoformat(started_at.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def query_since(value: str) -> str:
    """``since`` as the stored form (ISO 8601 UTC with ``Z``); refused (``bad_since``)
    unless it parses and stays within years 1 to 9999 once moved to UTC."""
    try:
        moment = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    except (ValueError, OverflowError):
        raise UsageError(f"since must be an ISO 8601 time, not {value!r}", "bad_since") from None


def encode_cursor(key: tuple[str, str]) -> str:
    return b64url_encode(json.dumps(list(key), separators=(",", ":")).encode())


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        created_at, run_id = strict_json.loads(b64url_decode(cursor))
    except (ValueError, TypeError):
        raise UsageError("the cursor is not one this coordinator issued", "bad_cursor") from None
    if not isinstance(created_at, str) or not isinstance(run_id, str):
        raise UsageError("the cursor is not one this coordinator issued", "bad_cursor")
    return created_at, run_id
