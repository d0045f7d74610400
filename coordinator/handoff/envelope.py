"""A run's budget ledger as arithmetic: the units it holds, what is left, how a handoff settles.

Every change to a run's budget is a :class:`BudgetEntry` (a unit): a handoff ``reserved``
its envelope at admission, ``consumed`` what it used and ``released`` the rest when it
ended; a proposal that was refused is ``rejected`` (nothing held). Model requests made
outside any handoff's envelope (the coordinator's own model roles) or beyond one (a remote
reporting more than its grant allowed) are ``spent``: they count against the run's budget
as they are, so its totals are the federation's totals.

Pure: no clock, no store, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from contracts.handoff import HandoffBudget, HandoffRecord, HandoffState

# The handoff id under which a local model role's requests are kept: ``model:<role>``.
LOCAL_PREFIX = "model:"
# A reservation counts against what is left until its release gives back the unused part.
_SIGN = {"reserved": 1, "released": -1, "spent": 1}


class UnitKind(StrEnum):
    RESERVED = "reserved"
    CONSUMED = "consumed"
    RELEASED = "released"
    REJECTED = "rejected"
    SPENT = "spent"


@dataclass(frozen=True)
class BudgetEntry:
    handoff_id: str
    attempt: int
    kind: UnitKind
    actions: int
    context_units: int
    effects: int
    reason: str
    model_requests: int = 0
    # Tokens behind the model requests; None when unknown (never taken as 0).
    model_tokens: int | None = None


def remaining(limit: HandoffBudget, units: Iterable[BudgetEntry]) -> HandoffBudget:
    """What ``limit`` leaves after ``units``; a model limit the run does not name stays absent."""
    spent = {"actions": 0, "context_units": 0, "effects": 0, "model_requests": 0, "tokens": 0}
    for entry in units:
        sign = _SIGN.get(entry.kind.value, 0)
        spent["actions"] += sign * entry.actions
        spent["context_units"] += sign * entry.context_units
        spent["effects"] += sign * entry.effects
        spent["model_requests"] += sign * entry.model_requests
        spent["tokens"] += sign * (entry.model_tokens or 0)
    return HandoffBudget(
        actions=limit.actions - spent["actions"],
        context_units=limit.context_units - spent["context_units"],
        effects=limit.effects - spent["effects"],
        model_requests=_less(limit.model_requests, spent["model_requests"]),
        model_tokens=_less(limit.model_tokens, spent["tokens"]),
    )


def plus(left: HandoffBudget, own: HandoffBudget | None) -> HandoffBudget:
    """``left`` with ``own`` (an envelope already reserved from it) given back."""
    if own is None:
        return left
    return HandoffBudget(
        actions=left.actions + own.actions,
        context_units=left.context_units + own.context_units,
        effects=left.effects + own.effects,
        model_requests=_more(left.model_requests, own.model_requests),
        model_tokens=_more(left.model_tokens, own.model_tokens),
    )


def settlement(record: HandoffRecord) -> list[tuple[UnitKind, HandoffBudget]]:
    """How an ended handoff closes its envelope: consumed, released, and spent beyond it.

    A handoff that was sent used one action and its context; its model requests and
    tokens are what the remote reported (no requests reported: none counted; tokens
    unknown under a token limit: the whole token envelope stays spent). Whatever the
    remote reported beyond the envelope is spent all the same: the run's totals say what
    the federation used, not what it allowed."""
    budget = record.budget
    assert budget is not None
    sent = record.remote_task_id is not None or any(
        event.state is HandoffState.DISPATCHED for event in record.events
    )
    usage = record.remote_model_usage
    requests = _within(usage.requests if usage else 0, budget.model_requests)
    tokens = _within(usage.total_tokens if usage else None, budget.model_tokens)
    used = HandoffBudget(
        actions=1 if sent else 0,
        context_units=budget.context_units if sent else 0,
        effects=0,
        model_requests=requests[0],
        model_tokens=tokens[0],
    )
    released = HandoffBudget(
        actions=budget.actions - used.actions,
        context_units=budget.context_units - used.context_units,
        effects=budget.effects,
        model_requests=_unused(budget.model_requests, requests[0]) or 0,
        model_tokens=_unused(budget.model_tokens, tokens[0]),
    )
    units = [(UnitKind.CONSUMED, used), (UnitKind.RELEASED, released)]
    if requests[1] or tokens[1]:
        beyond = HandoffBudget(
            actions=0,
            context_units=0,
            effects=0,
            model_requests=requests[1],
            model_tokens=tokens[1],
        )
        units.append((UnitKind.SPENT, beyond))
    return units


def _within(reported: int | None, held: int | None) -> tuple[int | None, int | None]:
    """``reported`` split into the part inside ``held`` and the part beyond it (no limit:
    all of it inside; unknown stays unknown)."""
    if reported is None:
        return None, None
    if held is None:
        return reported, 0
    return min(reported, held), max(0, reported - held)


def entry(record: HandoffRecord, kind: UnitKind, budget: HandoffBudget, reason: str) -> BudgetEntry:
    return BudgetEntry(
        handoff_id=record.handoff_id,
        attempt=record.attempt,
        kind=kind,
        actions=budget.actions,
        context_units=budget.context_units,
        effects=budget.effects,
        reason=reason,
        model_requests=budget.model_requests or 0,
        model_tokens=budget.model_tokens,
    )


def refused(record: HandoffRecord, reason: str) -> BudgetEntry:
    """The unit of a handoff refused at admission: its envelope, none of it reserved."""
    zero = HandoffBudget(actions=0, context_units=0, effects=0)
    return entry(record, UnitKind.REJECTED, record.budget or zero, reason)


def local_spend(role: str, requests: int, tokens: int | None) -> BudgetEntry:
    """The unit of model requests a local role made outside any handoff's envelope."""
    return BudgetEntry(
        f"{LOCAL_PREFIX}{role}",
        0,
        UnitKind.SPENT,
        0,
        0,
        0,
        "local_model_requests",
        requests,
        tokens,
    )


def model_totals(units: Iterable[BudgetEntry]) -> dict[str, int | None]:
    """The run's model requests over the federation (the coordinator's and every remote's)
    and its tokens (``None`` when any request's tokens are unknown)."""
    used = [u for u in units if u.kind in (UnitKind.CONSUMED, UnitKind.SPENT) and u.model_requests]
    remote = sum(u.model_requests for u in used if not u.handoff_id.startswith(LOCAL_PREFIX))
    tokens = [u.model_tokens for u in used]
    return {
        "requests": sum(u.model_requests for u in used),
        "remote_requests": remote,
        "total_tokens": None if None in tokens else sum(t or 0 for t in tokens),
    }


def unit_from_row(row: Mapping[str, object]) -> BudgetEntry:
    """A budget unit as the run store keeps it."""
    handoff_id, _, attempt = str(row["attempt_id"]).rpartition("/")
    tokens = row.get("model_tokens")
    return BudgetEntry(
        handoff_id,
        int(attempt),
        UnitKind(str(row["kind"])),
        int(str(row["actions"])),
        int(str(row["context_units"])),
        int(str(row["effects"])),
        str(row["reason"]),
        int(str(row.get("model_requests") or 0)),
        None if tokens is None else int(str(tokens)),
    )


def _unused(held: int | None, used: int | None) -> int | None:
    """What of an envelope goes back (None: the envelope names no such limit); nothing
    when what was used is unknown."""
    if held is None:
        return None
    return 0 if used is None else held - used


def _less(limit: int | None, spent: int) -> int | None:
    return None if limit is None else limit - spent


def _more(left: int | None, own: int | None) -> int | None:
    return None if left is None else left + (own or 0)
