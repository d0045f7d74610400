"""The hops token exchange granted, as a run's ledger keeps them.

Each child minted by exchange (:mod:`coordinator.authority.exchange`) is a
``delegation.exchanged`` event in its run's ledger and a row in the grants table naming
:data:`EXCHANGE_ATTEMPT_PREFIX` in place of an attempt. From those events come what a
parent has left after its children, the children of a handoff at any depth, and whether a
proof was used before.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from contracts import strict_json
from contracts.grant import Budget, Grant
from coordinator.authority.holder_proof import ExchangeRefused
from coordinator.storage.schema import audit_events
from coordinator.workspace import Workspace

EXCHANGED = "delegation.exchanged"
# A grants row of an exchanged child names this in place of an attempt.
EXCHANGE_ATTEMPT_PREFIX = "exchange:"


def remaining_after_children(connection: Connection, parent: Grant, run_id: str) -> Budget:
    """The parent's budget less every child exchanged from it so far (its run's ledger)."""
    left = parent.handoff.budget.model_dump()
    for data in _hops_of(connection, run_id):
        if data.get("parent_jti") != parent.jti:
            continue
        for name, spent in data["budget"].items():
            if left.get(name) is not None and spent is not None:
                left[name] -= spent
    return Budget.model_validate({k: max(v, 0) if v is not None else v for k, v in left.items()})


def _hops_of(connection: Connection, run_id: str) -> list[dict[str, Any]]:
    """The data of every hop granted in the run (its ``delegation.exchanged`` events)."""
    query = select(audit_events.c.canonical).where(
        audit_events.c.run_id == run_id, audit_events.c.event_type == EXCHANGED
    )
    return [strict_json.loads(canonical)["data"] for (canonical,) in connection.execute(query)]


def derived_hops(ws: Workspace, run_id: str, handoffs: set[str]) -> dict[str, str]:
    """The hops exchanged from ``handoffs``, and from those, at any depth: each hop's
    handoff id and the agent it was minted for."""
    with ws.engine().connect() as connection:
        hops = _hops_of(connection, run_id)
    derived: dict[str, str] = {}
    parents = set(handoffs)
    while True:
        found = {
            str(hop["handoff_id"]): str(hop["to"])
            for hop in hops
            if hop.get("parent_handoff_id") in parents and hop["handoff_id"] not in derived
        }
        if not found:
            return derived
        derived.update(found)
        parents = set(found)


def check_unused(connection: Connection, run_id: str, proof_jti: str) -> None:
    """``proof_replayed`` if a hop of the run was granted on this proof (by any process
    of this owner: the in-memory guard knows only its own)."""
    if any(data.get("proof_jti") == proof_jti for data in _hops_of(connection, run_id)):
        raise ExchangeRefused(401, "proof_replayed", "this proof was used before")


def is_exchanged(attempt_id: str) -> bool:
    """Whether a grants row is a child minted by token exchange."""
    return attempt_id.startswith(EXCHANGE_ATTEMPT_PREFIX)
