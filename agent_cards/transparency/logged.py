"""A head of another service's log, read from the signed statement that states it.

Two statements state a head of a member's decision log:

* a signed tree head (:mod:`agent_cards.transparency.heads`), which an older member
  signed apart and carried in its receipt as ``log_head``;
* a receipt (:mod:`agent_cards.transparency.receipts`) carrying the log's size and root
  after the receipt's own entry as claims of its own, :data:`LOG_TREE_SIZE` and
  :data:`LOG_ROOT_HASH` (what a member sends now: one signature per receipt). The head
  it states is ``iss``, those two, the receipt's ``issued_at``, its ``kid``, and the
  receipt itself as its proof.

A witness keeps either statement as the head's ``jws``. :func:`head_of_receipt` reads
the head a receipt already verified states (the coordinator, as it keeps it), and
:func:`verify_logged` verifies either statement and reads its head (reconcile, when it
reads kept heads back): the one place a receipt's log claims become a head.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_cards.transparency.heads import Head, head_from, verify_head
from agent_cards.transparency.receipts import RECEIPT_TYP
from agent_cards.transparency.statements import (
    StatementInvalid,
    unverified_header,
    verify_statement,
)
from agent_cards.trusted import TrustedKeys

LOG_TREE_SIZE = "log_tree_size"
LOG_ROOT_HASH = "log_root_hash"
LOG_CLAIMS = (LOG_TREE_SIZE, LOG_ROOT_HASH)
# A receipt whose log claims are absent in part or mistyped: it states no head.
LOG_CLAIMS_INVALID = "log_claims_invalid"


def log_claims(size: int, root: bytes) -> dict[str, Any]:
    """The claims by which a receipt states its issuer's log: ``size`` entries, ``root``."""
    return {LOG_TREE_SIZE: size, LOG_ROOT_HASH: root.hex()}


def head_of_receipt(claims: Mapping[str, Any], kid: str, jws: str) -> Head | None:
    """The head of its issuer's log that the receipt ``jws`` (verified, its claims
    ``claims``, signed by ``kid``) states; None when it states none (an older receipt,
    which may carry ``log_head`` instead); ``log_claims_invalid`` when its log claims are
    not both there and well formed (a size that is an integer >= 0, a root of 64
    lowercase hex digits) or it has no ``issued_at`` string."""
    if not any(name in claims for name in LOG_CLAIMS):
        return None
    stated = {
        "iss": claims.get("iss"),
        "tree_size": claims.get(LOG_TREE_SIZE),
        "root_hash": claims.get(LOG_ROOT_HASH),
        "issued_at": claims.get("issued_at"),
    }
    try:
        return head_from(stated, kid, jws)
    except StatementInvalid:
        raise StatementInvalid(
            LOG_CLAIMS_INVALID,
            f"a receipt states its log with {LOG_TREE_SIZE} (an integer >= 0), "
            f"{LOG_ROOT_HASH} (64 lowercase hex digits) and issued_at",
        ) from None


def verify_logged(jws: Any, keys: TrustedKeys) -> Head:
    """The head ``jws`` states, once one of ``keys`` verified it in its own name: a signed
    tree head, or a receipt with log claims. Else :class:`StatementInvalid`: the reasons
    of :func:`~agent_cards.transparency.statements.verify_statement`, ``head_invalid``
    (a head, or a receipt stating no log) or ``log_claims_invalid``."""
    if not (isinstance(jws, str) and _typ(jws) == RECEIPT_TYP):
        return verify_head(jws, keys)
    claims = verify_statement(jws, keys, RECEIPT_TYP)
    head = head_of_receipt(claims, str(unverified_header(jws)["kid"]), jws)
    if head is None:
        raise StatementInvalid("head_invalid", "the receipt states no head of its log")
    return head


def _typ(jws: str) -> Any:
    try:
        return unverified_header(jws).get("typ")
    except StatementInvalid:
        return None  # verify_head says what is wrong with it
