"""The remote's receipt, checked before return admission (the receipts extension).

An agent whose card declares
:data:`~agent_cards.transparency.receipts.RECEIPTS_EXTENSION_URI` must send, with its
terminal task, a receipt signed by a key pinned for it at registration, stating exactly
the task returned (id, artifact digest, state), the handoff it was opened under (id, an
attempt not later than ours), and a delegation token this coordinator minted for that
handoff (its ``jti``, with the ``req_digest`` that token bound), issued (``iss``) by the
agent whose key signed it: the identity (:mod:`agent_cards.identity`) of the pinned key
that verified it, which is also the audience the handoff's tokens were minted for.
Anything else is refused before the artifact is judged: ``receipt_missing``,
``receipt_invalid`` (does not verify with the pinned key), ``receipt_mismatch``,
``receipt_issuer_mismatch``. A verified receipt is kept in the ledger (with the verdict on
its return, or as a ``handoff.receipt``) with the exact artifacts its digest covers, and
with who signed it (the thumbprint of the pinned key that verified it), under which the
head of the agent's log it states is witnessed. The receipts of the hops the agent
delegated to, which its artifacts carry, are checked with it
(:mod:`coordinator.handoff.hop_receipts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_cards.transparency.receipts import check_receipt, receipt_of
from agent_cards.transparency.statements import StatementInvalid, unverified_header
from agent_cards.trusted import TrustedKeys
from contracts import strict_json
from contracts.wire import Task, to_wire
from coordinator.handoff.hop_receipts import CheckedHop, HopRefusal, Hops, check_hops


@dataclass(frozen=True)
class ReceiptExpectation:
    """What a receipt of this handoff must state, and the keys it must verify with."""

    keys: TrustedKeys
    handoff_id: str
    attempt: int
    # jti -> req_digest of every token this coordinator minted for the handoff
    minted: Mapping[str, str | None]
    # the ``aud`` those tokens were minted for: the agent's identity (None: none known)
    audience: str | None = None
    # the children exchanged from the handoff, whose receipts the artifacts may carry
    hops: Hops = field(default=dict)


@dataclass(frozen=True)
class CheckedReceipt:
    jws: str
    claims: dict[str, Any]
    # the exact artifacts its ``artifact_digest`` covers (JSON text, ``[]`` for none)
    artifacts: str = "[]"
    # the hop receipts the artifacts carry, verified, and the first refused (if any)
    hops: tuple[CheckedHop, ...] = ()
    hop_refusal: HopRefusal | None = None
    # the RFC 7638 thumbprint of the pinned key that verified it ("" when not known)
    signer: str = ""


def receipt_problem(
    task: Task,
    expected: ReceiptExpectation,
    covered: str | None = None,
    wire: Mapping[str, Any] | None = None,
) -> str | CheckedReceipt:
    """The verified receipt of ``task``, or the reason it is refused; ``covered`` and
    ``wire``: the task's :func:`covered_artifacts` and its ``to_wire`` form when the caller
    has made them already (the task is serialised once for every check of its return)."""
    receipt = receipt_of(task.metadata)
    wire = to_wire(task) if wire is None else wire
    try:
        claims = check_receipt(receipt, expected.keys, wire, {})
    except StatementInvalid as exc:
        return exc.reason
    attempt = claims.get("attempt")
    if (
        claims.get("handoff_id") != expected.handoff_id
        or type(attempt) is not int
        or not 1 <= attempt <= expected.attempt
        or not _ours(claims.get("jti"), claims.get("req_digest"), expected.minted)
    ):
        return "receipt_mismatch"
    if expected.audience is not None and claims.get("iss") != expected.audience:
        return "receipt_issuer_mismatch"
    hops, refusal = check_hops(wire, expected.hops)
    if covered is None:
        covered = covered_artifacts(task, wire)
    signer = _signer(str(receipt), expected.keys)
    return CheckedReceipt(str(receipt), claims, covered, hops, refusal, signer)


def _signer(receipt: str, keys: TrustedKeys) -> str:
    """The thumbprint of the key of ``keys`` that verified ``receipt``: the key its ``kid``
    names (found by it), whose own ``kid`` was computed from it when it was pinned."""
    key = keys.get(str(unverified_header(receipt)["kid"]))
    return key.kid if key is not None else ""


def covered_artifacts(task: Task, wire: Mapping[str, Any] | None = None) -> str:
    """The artifacts ``task`` returned as the exact JSON text kept (the encoding of the
    ``artifact.*`` events' ``content_hash``), which a receipt's digest covers; from the
    task's ``to_wire`` form ``wire`` when given (a nested artifact dumps as it does alone)."""
    if wire is None:
        artifacts = [to_wire(artifact) for artifact in task.artifacts or []]
    else:
        artifacts = wire.get("artifacts") or []
    return strict_json.dumps(artifacts).decode()


def _ours(jti: Any, req_digest: Any, minted: Mapping[str, str | None]) -> bool:
    """The receipt names a token minted here with the digest it bound; with no token
    minted (an agent that takes none), it names none."""
    if jti is None:
        return req_digest is None and not minted
    return isinstance(jti, str) and jti in minted and req_digest == minted[jti]
