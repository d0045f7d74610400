"""Receipts issued with every terminal task (the receipts extension,
:mod:`agent_cards.transparency.receipts`; docs/receipts-extension.md).

:meth:`ReceiptIssuer.stamp` is applied to every task snapshot that leaves the service
(a send's answer, GetTask, CancelTask, the final status event of a stream or a push):
a terminal task gets ``metadata[RECEIPTS_EXTENSION_URI].receipt``, signed with the card's
active key, over the very artifacts it carries. The receipt's facts are recorded in the
decision log once per task (``receipt`` entry), and the receipt carries the log's head
signed after that entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent_cards.keys import SigningKey
from agent_cards.transparency.receipts import (
    RECEIPT_KEY,
    RECEIPTS_EXTENSION_URI,
    Bound,
    issue_receipt,
    receipt_claims,
)
from contracts.wire import TERMINAL_TASK_STATES, Task, to_wire
from remote_risk.audit.log import DecisionLedger

RECEIPT_ENTRY = "receipt"


def bound_metadata(jti: str | None, req_digest: str | None) -> dict[str, Any]:
    """What a task keeps of the token that opened it, under the extension's key."""
    return {RECEIPTS_EXTENSION_URI: {"jti": jti, "reqDigest": req_digest}}


def _bound(metadata: Mapping[str, Any]) -> Bound:
    kept = metadata.get(RECEIPTS_EXTENSION_URI)
    kept = kept if isinstance(kept, Mapping) else {}
    return Bound(
        handoff_id=metadata.get("handoffId"),
        attempt=metadata.get("attempt"),
        jti=kept.get("jti"),
        req_digest=kept.get("reqDigest"),
    )


class ReceiptIssuer:
    """Signs the receipt of each terminal task with the card key, as ``issuer``."""

    def __init__(self, key: Callable[[], SigningKey], issuer: str, log: DecisionLedger) -> None:
        self._key = key
        self._issuer = issuer
        self.log = log

    def stamp(self, task: Task) -> Task:
        """``task`` with its receipt, when it is terminal; unchanged otherwise."""
        if task.status.state not in TERMINAL_TASK_STATES:
            return task
        metadata = dict(task.metadata or {})
        bound = _bound(metadata)
        kept = dict(metadata.get(RECEIPTS_EXTENSION_URI) or {})
        kept.pop(RECEIPT_KEY, None)
        claims = receipt_claims(to_wire(task), bound, self._issuer)
        self.log.append(
            RECEIPT_ENTRY, claims, key=f"receipt:{task.id}", handoff_id=bound.handoff_id
        )
        key = self._key()
        claims["log_head"] = self.log.sign_head(key, self._issuer).jws
        metadata[RECEIPTS_EXTENSION_URI] = {**kept, RECEIPT_KEY: issue_receipt(claims, key)}
        return task.model_copy(update={"metadata": metadata})


def no_receipt(task: Task) -> Task:
    """The stamp of an agent without receipts: the task as it is."""
    return task
