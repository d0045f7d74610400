"""Receipts issued with every terminal task (the receipts extension,
:mod:`agent_cards.transparency.receipts`; docs/receipts-extension.md).

:meth:`ReceiptIssuer.stamp` is applied to every task snapshot that leaves the service
(a send's answer, GetTask, CancelTask, the final status event of a stream or a push):
a terminal task gets ``metadata[RECEIPTS_EXTENSION_URI].receipt``, signed over the very
artifacts it carries with the card key the task's token was minted for (its ``aud``: the
active key, or during a rotation the key being replaced or the one announced), so the
coordinator verifies it with the key it pins whichever side of a rotation it is on. The
receipt's facts are recorded in the decision log once per task (``receipt`` entry), and
the receipt states the log's size and root covering that entry as claims of its own
(:mod:`agent_cards.transparency.logged`): one signature per receipt, no head signed
beside it. Entry and claims are one write, within the send's transaction when it has
one (:func:`~member_kit.audit.log.heads_after_commit`). While the key set holds more
than one key, the key-succession statements go with the receipt
(:mod:`agent_cards.transparency.succession`), so the coordinator learns the next key from
the key it pins, before that key signs anything for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from agent_cards.identity import identity_of, signing_key_named
from agent_cards.keys import KeySet
from agent_cards.transparency.entries import RECEIPT_ENTRY
from agent_cards.transparency.logged import log_claims
from agent_cards.transparency.receipts import (
    RECEIPT_KEY,
    RECEIPTS_EXTENSION_URI,
    Bound,
    issue_receipt,
    receipt_claims,
)
from agent_cards.transparency.succession import SUCCESSIONS, successions_of
from contracts.wire import TERMINAL_TASK_STATES, Task
from member_kit.audit.log import DecisionLedger


def bound_metadata(jti: str | None, req_digest: str | None, aud: str | None) -> dict[str, Any]:
    """What a task keeps of the token that opened it, under the extension's key."""
    return {RECEIPTS_EXTENSION_URI: {"jti": jti, "reqDigest": req_digest, "aud": aud}}


def _bound(metadata: Mapping[str, Any]) -> Bound:
    kept = metadata.get(RECEIPTS_EXTENSION_URI)
    kept = kept if isinstance(kept, Mapping) else {}
    return Bound(
        handoff_id=metadata.get("handoffId"),
        attempt=metadata.get("attempt"),
        jti=kept.get("jti"),
        req_digest=kept.get("reqDigest"),
    )


def receipt_view(task: Task) -> dict[str, Any]:
    """The members of ``task``'s wire form a receipt's claims read (its id, status and
    artifacts), dumped as :func:`to_wire` dumps the task, in one dump that leaves out
    the task's history and metadata (no ``artifacts`` when it has none: the digest of
    none is that of ``[]``)."""
    return task.model_dump(
        mode="json", by_alias=True, exclude_none=True, include={"id", "status", "artifacts"}
    )


class ReceiptIssuer:
    """Signs the receipt of each terminal task with the card key its token was minted for,
    in that key's name."""

    def __init__(self, keys: Callable[[], KeySet], log: DecisionLedger) -> None:
        self._keys = keys
        self.log = log

    def stamp(self, task: Task) -> Task:
        """``task`` with its receipt, when it is terminal; unchanged otherwise."""
        if task.status.state not in TERMINAL_TASK_STATES:
            return task
        metadata = dict(task.metadata or {})
        bound = _bound(metadata)
        kept = dict(metadata.get(RECEIPTS_EXTENSION_URI) or {})
        kept.pop(RECEIPT_KEY, None)
        kept.pop(SUCCESSIONS, None)
        keys, now = self._keys(), datetime.now(UTC)  # one moment for the key and successions
        key = signing_key_named(keys, kept.get("aud"), now)
        issuer = identity_of(key.verification_key())
        claims = receipt_claims(receipt_view(task), bound, issuer)
        size, root = self.log.append_covered(
            RECEIPT_ENTRY, claims, key=f"receipt:{task.id}", handoff_id=bound.handoff_id
        )
        claims.update(log_claims(size, root))  # the entry records the claims without them
        stamped = {**kept, RECEIPT_KEY: issue_receipt(claims, key)}
        successions = successions_of(keys, now)
        if successions:
            stamped[SUCCESSIONS] = successions
        metadata[RECEIPTS_EXTENSION_URI] = stamped
        return task.model_copy(update={"metadata": metadata})


def no_receipt(task: Task) -> Task:
    """The stamp of an agent without receipts: the task as it is."""
    return task
