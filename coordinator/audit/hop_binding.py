"""Step 7 of a proof bundle check (docs/audit-bundle.md): the hops' receipts.

A member that sub-delegated carried up the receipts of the agents it asked; the
coordinator checked each at the member's return and kept it as a ``hop.receipt`` event
under the member's handoff (:mod:`coordinator.handoff.hop_receipts`). Every such event
among the bundle's verified events is checked, listed in ``hop_receipts`` or not: its
signature with a remote key the reader holds, in that key's own name (as step 6), then
its binding to the child the coordinator minted: the first ``delegation.exchanged``
event before it with the receipt's ``jti``, exchanged from the event's handoff, for the
audience that signed (``iss`` is the hop's ``aud``), under the hop's handoff, attempt 1,
no ``req_digest``, a terminal state. So the hop's agent's key is needed: without it the
answer is ``untrusted_key``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_cards.transparency.statements import unverified_header
from agent_cards.trusted import TrustedKeys
from coordinator.audit.log.verification import Break, BundleBroken
from coordinator.audit.receipt_binding import Records, same_member, verified_claims
from coordinator.audit.receipts import HOP_RECEIPT_EVENT, compact

EXCHANGED_EVENT = "delegation.exchanged"  # coordinator.authority.hops.EXCHANGED
TERMINAL_STATES = (
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
)


def check_hop_receipts(
    listed: list[Mapping[str, Any]], records: Records, remotes: TrustedKeys
) -> list[dict[str, Any]]:
    """Steps 7.1 and 7.2: the list, then every hop receipt event; what was checked of
    each (its event, the hop's handoff and agent, the kid that verified it)."""
    for entry in listed:
        record = records.get(entry["seq"]) or {}
        data = record.get("data") or {}
        if record.get("event_type") != HOP_RECEIPT_EVENT or not same_member(
            data, "receipt", entry, "receipt"
        ):
            raise BundleBroken(
                entry["seq"], Break.RECEIPT_INVALID, "not the hop receipt the included event keeps"
            )
    checked = []
    for seq in sorted(records):
        if records[seq]["event_type"] == HOP_RECEIPT_EVENT:
            claims = verified_claims(seq, records[seq], remotes)
            hop = _hop_bound(seq, records[seq], claims, records)
            checked.append(
                {
                    "seq": seq,
                    "handoff_id": hop.get("handoff_id"),
                    "agent": hop.get("to"),
                    "kid": unverified_header(compact(records[seq]["data"]["receipt"])).get("kid"),
                    "iss": claims.get("iss"),
                }
            )
    return checked


def _hop_bound(
    seq: int, record: Mapping[str, Any], claims: Mapping[str, Any], records: Records
) -> Mapping[str, Any]:
    """7.2.3: the exchanged hop the receipt states, or ``receipt_mismatch``."""
    jti = claims.get("jti")
    hops = [
        records[s]["data"]
        for s in sorted(records)
        if s < seq and records[s]["event_type"] == EXCHANGED_EVENT
    ]
    hop = next((h for h in hops if isinstance(jti, str) and h.get("jti") == jti), None)
    problem = None if hop is not None else "the receipt's jti is no child the ledger exchanged"
    if hop is not None:
        problem = _hop_problem(record, claims, hop)
    if problem is not None:
        raise BundleBroken(seq, Break.RECEIPT_MISMATCH, problem)
    assert hop is not None
    return hop


def _hop_problem(
    record: Mapping[str, Any], claims: Mapping[str, Any], hop: Mapping[str, Any]
) -> str | None:
    attempt = claims.get("attempt")
    if not same_member(hop, "parent_handoff_id", record, "handoff_id"):
        return "the child was not exchanged from the handoff that carried its receipt"
    if not same_member(claims, "handoff_id", hop, "handoff_id"):
        return "the receipt's handoff_id is not the child's"
    if not (isinstance(attempt, int) and not isinstance(attempt, bool) and attempt == 1):
        return "the receipt's attempt is not 1"
    if claims.get("req_digest") is not None:
        return "the receipt names a req_digest, which no child binds"
    if not isinstance(claims.get("iss"), str) or not same_member(claims, "iss", hop, "aud"):
        return "the receipt's iss is not the audience the child was minted for"
    if not isinstance(claims.get("task_id"), str) or claims.get("state") not in TERMINAL_STATES:
        return "the receipt states no task or no terminal state"
    return None
