"""What the ledger keeps of signed statements from other services: receipts and their keys.

A remote's receipt (a JWS over what it was asked and what it answered) is kept in the
``data`` of the verdict on the return it came with (an ``artifact.*`` event), or, when no
verdict is given (a task that failed, say), of a ``handoff.receipt`` event of its own:
:func:`records_receipt` is the one rule by which every reader finds it. It is stored in
the RFC 7515 section 7.2.2 *flattened JSON* serialisation, ``{"protected", "payload",
"signature"}``, rather than the compact form: a receipt is a statement, not a credential,
and the ledger's redaction (:func:`~coordinator.audit.log.events.redact_secrets`) replaces
every compact-JWS-shaped value, as it must for bearer tokens. The receipt's ``kid`` is
kept beside it, so that a proof bundle can carry the public key it needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_cards.jws import b64url_decode
from contracts import strict_json
from coordinator.audit.log.events import DISPATCH_EVENT, AuditEvent
from coordinator.errors import LedgerError

RECEIPT_EVENT = "handoff.receipt"
# The receipt of a hop (an agent a member delegated to, by exchange) the member carried
# up, kept like a receipt (same ``data``) under the member's handoff; and a refused one.
HOP_RECEIPT_EVENT = "hop.receipt"
HOP_REFUSED_EVENT = "hop.receipt_refused"
GRANT_EVENT = "grant.minted"
VERDICT_PREFIX = "artifact."


def grant_recorded(event_type: str, data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The grant an event records (what is shown of a delegation token minted: ``jti``,
    ``claims_digest``, ``req_digest``, ``aud``, ...): a ``grant.minted`` event's ``data``,
    or the ``grant`` object a dispatch carries (the token the message went out with);
    None for any other event. Ledgers from before dispatches carried them have only the
    first kind."""
    if event_type == GRANT_EVENT:
        return data
    if event_type == DISPATCH_EVENT:
        grant = data.get("grant")
        return grant if isinstance(grant, Mapping) else None
    return None


def records_receipt(event_type: str, data: Mapping[str, Any]) -> bool:
    """Whether an event records a remote's receipt (in ``data["receipt"]``, with its
    ``kid``): every ``handoff.receipt`` (one without a receipt is a broken one), and a
    verdict (``artifact.*``) that carries the receipt its return was judged with. Ledgers
    and bundles from before verdicts carried them have only the first kind."""
    if event_type == RECEIPT_EVENT:
        return True
    return event_type.startswith(VERDICT_PREFIX) and "receipt" in data


def flattened(compact: str) -> dict[str, str]:
    """A compact JWS in the flattened JSON serialisation (RFC 7515 section 7.2.2)."""
    parts = compact.split(".") if isinstance(compact, str) else []
    if len(parts) != 3 or not all(parts[::2]):
        raise LedgerError("a receipt must be a compact JWS", "receipt_invalid")
    return {"protected": parts[0], "payload": parts[1], "signature": parts[2]}


def compact(jws: Mapping[str, Any]) -> str:
    """The compact serialisation of a flattened JWS."""
    return f"{jws['protected']}.{jws['payload']}.{jws['signature']}"


def protected_header(jws: Mapping[str, Any]) -> dict[str, Any]:
    """The decoded protected header of a flattened JWS (not verified)."""
    try:
        header = strict_json.loads(b64url_decode(str(jws["protected"])))
    except (KeyError, ValueError):
        raise LedgerError(
            "the receipt's protected header is unreadable", "receipt_invalid"
        ) from None
    if not isinstance(header, dict):
        raise LedgerError("the receipt's protected header is not an object", "receipt_invalid")
    return header


def receipt_event(
    receipt: str,
    *,
    actor: str,
    run_id: str,
    handoff_id: str,
    attempt: int,
    remote_task_id: str | None = None,
    trace_id: str | None = None,
) -> AuditEvent:
    """The event that keeps a remote's receipt (already verified by the caller against
    the key pinned for that remote). Append it with the run's trail or ledger."""
    jws = flattened(receipt)
    return AuditEvent(
        event_type=RECEIPT_EVENT,
        actor=actor,
        run_id=run_id,
        handoff_id=handoff_id,
        attempt=attempt,
        remote_task_id=remote_task_id,
        trace_id=trace_id,
        data=receipt_data(receipt, jws),
    )


def receipt_data(receipt: str, jws: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What an event recording a receipt keeps of it (a ``handoff.receipt``'s ``data``,
    or the members a verdict carries)."""
    jws = jws or flattened(receipt)
    return {"receipt": dict(jws), "kid": protected_header(jws).get("kid")}
