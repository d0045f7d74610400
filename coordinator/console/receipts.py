"""A remote's receipt as the timeline shows it: its fields, and whether it verifies now.

The ledger keeps a receipt (in the verdict on its return, or a ``handoff.receipt``) as a
flattened JWS, base64 that tells an operator nothing. Here it is decoded into the claims
the remote signed (task, handoff, attempt, token, artifact digest, state, time) and
checked again, now, against the keys pinned for the registered agents: verified with the
key pinned for which agent, or the reason it does not verify (its key no longer pinned,
a signature that fails). It was
verified when it was received (an unverified receipt is never kept); this says whether
it still does. Every value is the remote's text and is escaped by the template.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_cards.jwk import b64url_decode
from agent_cards.transparency.receipts import verified_receipt
from agent_cards.transparency.statements import StatementInvalid
from agent_cards.trusted import TrustedKeys
from contracts import strict_json
from coordinator.audit.receipts import compact

# The claims shown, in this order (what the receipts extension has a receipt state).
FIELDS = (
    "iss",
    "task_id",
    "state",
    "handoff_id",
    "attempt",
    "jti",
    "req_digest",
    "artifact_digest",
    "issued_at",
)


@dataclass(frozen=True)
class ReceiptView:
    fields: tuple[tuple[str, str], ...]
    verified: bool
    verdict: str


def receipt_view(data: Mapping[str, Any], pinned: Mapping[str, TrustedKeys]) -> ReceiptView:
    """The ``data`` of an event recording a receipt, decoded and checked with ``pinned``
    (agent name -> the keys pinned for it)."""
    jws = data.get("receipt")
    if not isinstance(jws, Mapping):
        return ReceiptView((), False, "not verified: the event holds no receipt")
    claims = _claims(jws)
    fields = [(name, _text(claims[name])) for name in FIELDS if name in claims]
    fields.append(("kid", _text(data.get("kid"))))
    try:
        signed = compact(jws)
    except KeyError:
        return ReceiptView(tuple(fields), False, "not verified: the receipt is malformed")
    return ReceiptView(tuple(fields), *_verdict(signed, data.get("kid"), pinned))


def _claims(jws: Mapping[str, Any]) -> dict[str, Any]:
    """The payload's claims, unverified (to show them), or none if unreadable."""
    try:
        claims = strict_json.loads(b64url_decode(str(jws.get("payload"))))
    except (ValueError, TypeError):
        return {}
    return claims if isinstance(claims, dict) else {}


def _verdict(signed: str, kid: Any, pinned: Mapping[str, TrustedKeys]) -> tuple[bool, str]:
    holders = [
        name for name, keys in sorted(pinned.items()) if isinstance(kid, str) and kid in keys
    ]
    if not holders:
        return False, "not verified now: its key is pinned for no registered agent"
    failure = ""
    for name in holders:
        try:
            verified_receipt(signed, pinned[name])
        except StatementInvalid as exc:
            failure = f"against the key pinned for {name}, {exc}"
            continue
        return True, f"verified with the key pinned for {name}"
    return False, f"not verified now {failure}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else strict_json.dumps(value).decode()
