"""The entries of a member's decision log, as every reader of it takes them.

A member's log (``member_kit.audit.log``) holds two kinds of entry: a ``decision`` (an
authorization decision about an authenticated party) and a ``receipt`` (the facts of a
receipt issued). A call allowed whose own receipt is entered in the same write rides on
that receipt's entry, as its ``decision`` member, instead of taking an entry of its own:
one entry for a blocking send, whose decision and receipt are of one request. Either
form states the same facts; :func:`decision_in` reads the decision from both, so a
reader never asks which form a member wrote (docs/receipts-extension.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DECISION_ENTRY = "decision"
RECEIPT_ENTRY = "receipt"
# The member of a receipt entry's data holding the decision that rode on it.
DECISION_ON_RECEIPT = "decision"


def decision_in(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The decision an entry ``record`` states: a decision entry's data, or the decision
    a receipt entry carries; None for any other entry."""
    data = record.get("data")
    if not isinstance(data, Mapping):
        return None
    kind = record.get("kind")
    if kind == DECISION_ENTRY:
        return data
    carried = data.get(DECISION_ON_RECEIPT) if kind == RECEIPT_ENTRY else None
    return carried if isinstance(carried, Mapping) else None


def rides_on(decision: Mapping[str, Any], receipt: Mapping[str, Any]) -> bool:
    """Whether ``decision`` may ride on the entry of the receipt whose claims are
    ``receipt``: a call allowed with the token the receipt binds (its ``jti``)."""
    jti = receipt.get("jti")
    return decision.get("allowed") is True and jti is not None and decision.get("jti") == jti
