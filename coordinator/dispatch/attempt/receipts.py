"""The receipts extension on the coordinator's side: what a handoff's receipt must state
(:func:`expectation_for`) and what is kept of a verified one (:func:`keep_receipt`).

The check itself is one place, in return admission
(:mod:`coordinator.handoff.receipt_check`); here are its inputs: the keys pinned for the
agent at registration, the tokens this coordinator minted for the handoff (``jti`` and
``req_digest`` of each grant the ledger records) and the audience they were minted for (the
agent's identity). A verified receipt is kept in the ledger with the verdict on its return
(in that ``artifact.*`` event), or as a ``handoff.receipt`` event when no verdict is
given, with, in the same transaction, a row of ``artifacts`` holding the exact artifacts
its digest covers (``[]`` when none; whether or not return admission judged them, so a
proof bundle can carry them), and the head of the remote's log it states as a witnessed
head in ``tree_heads``, filed under its signer: the thumbprint of the pinned key that
verified it (the log it names is kept as stated, and never looked up by). That head is the
receipt's own log claims, verified with it, the receipt its proof
(:mod:`agent_cards.transparency.logged`); an older remote's receipt carries a tree head
signed apart instead (``log_head``), verified here and kept as its own proof. What states
no well-formed head keeps the receipt, but no head (logged with its reason). The hop
receipts the agent's artifacts carry are checked against the children exchanged from the
handoff (:func:`exchanged_hops`, each with its own agent's pinned keys) and kept as
``hop.receipt`` events, the first refused as ``hop.receipt_refused``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import Connection

from agent_cards.clock import utc_now
from agent_cards.transparency.heads import Head, verify_head_signer
from agent_cards.transparency.logged import head_of_receipt
from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from agent_cards.transparency.statements import StatementInvalid
from agent_cards.transparency.succession import successions_in
from agent_cards.trusted import TrustedKeys
from contracts.handoff import HandoffRecord
from contracts.wire import TERMINAL_TASK_STATES, Task
from coordinator.audit.log.events import timestamp
from coordinator.audit.log.tree_heads import WITNESSED, head_row
from coordinator.audit.receipts import (
    HOP_RECEIPT_EVENT,
    HOP_REFUSED_EVENT,
    RECEIPT_EVENT,
    grant_recorded,
    receipt_data,
)
from coordinator.audit.trail import AuditTrail
from coordinator.authority.hops import EXCHANGED
from coordinator.errors import RegistryError
from coordinator.handoff.hop_receipts import Hop
from coordinator.handoff.receipt_check import CheckedReceipt, ReceiptExpectation, receipt_problem
from coordinator.handoff.returns import content_digest
from coordinator.handoff.run import Run
from coordinator.remote.cards import key_succession
from coordinator.remote.cards.pinned import pinned_key_set
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.storage import driver
from coordinator.storage.runs import Step
from coordinator.storage.schema import artifacts

logger = logging.getLogger(__name__)
RECEIPT_REFUSED_EVENT = "handoff.receipt_refused"
# The ``decision`` of the artifacts row kept with a receipt (not a verdict on them).
COVERED_BY_RECEIPT = "covered_by_receipt"


def declares_receipts(agent: RegisteredAgent) -> bool:
    extensions = agent.agent_card.capabilities.extensions or []
    return any(extension.uri == RECEIPTS_EXTENSION_URI for extension in extensions)


def pinned_keys(agent: RegisteredAgent) -> TrustedKeys:
    """The keys pinned for ``agent`` (none: no receipt can verify)."""
    try:
        return pinned_key_set(agent.pinned_jwks or {"keys": []})
    except ValueError:
        return TrustedKeys()


class MintedTokens(Mapping[str, "str | None"]):
    """``jti -> req_digest`` of every token minted for one handoff: those this process
    minted, from memory; the ledger's grants are read only when a jti
    is asked for that this process did not mint (a run recovered from an earlier one)."""

    def __init__(self, run: Run, record: HandoffRecord) -> None:
        self._run = run
        self._handoff_id = record.handoff_id
        self._known = dict(run.minted.get(record.handoff_id, {}))
        self._read = False

    def _all(self) -> dict[str, str | None]:
        if not self._read:
            self._read = True
            self._known.update(_from_ledger(self._run, self._handoff_id))
        return self._known

    def __getitem__(self, jti: str) -> str | None:
        return self._known[jti] if jti in self._known else self._all()[jti]

    def __contains__(self, jti: object) -> bool:
        return jti in self._known or jti in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def _from_ledger(run: Run, handoff_id: str) -> dict[str, str | None]:
    minted: dict[str, str | None] = {}
    ledger = run.trail.ledger
    stored = ledger.events(run.run_id) if ledger is not None else []
    facts = [(e.event_type, e.handoff_id, e.data) for e in stored]
    facts += [(e.event_type, e.handoff_id, dict(e.data)) for e in run.trail.pending]
    for event_type, handoff, data in facts:
        grant = grant_recorded(event_type, data) if handoff == handoff_id else None
        jti = grant.get("jti") if grant is not None else None
        if grant is not None and isinstance(jti, str):
            digest = grant.get("req_digest")
            minted[jti] = digest if isinstance(digest, str) else None
    return minted


def expectation_for(
    run: Run, agent: RegisteredAgent, record: HandoffRecord
) -> ReceiptExpectation | None:
    """What the receipt of ``record``'s task must state, if ``agent`` declares receipts."""
    if not declares_receipts(agent):
        return None
    return ReceiptExpectation(
        keys=pinned_keys(agent),
        handoff_id=record.handoff_id,
        attempt=record.attempt,
        minted=MintedTokens(run, record),
        audience=agent.known_identity,  # what dispatch.grants mints tokens for
        hops=lambda: exchanged_hops(run, record.handoff_id),
    )


def exchanged_hops(run: Run, handoff_id: str) -> dict[str, Hop]:
    """The children exchanged from ``handoff_id`` (its ``delegation.exchanged`` events)
    by jti, each with the keys pinned for the registered agent it was minted for."""
    ledger = run.trail.ledger
    stored = ledger.events(run.run_id) if ledger is not None else []
    registry = Registry(run.data) if run.data is not None else None
    hops = {}
    for event in stored:
        data = event.data
        if event.event_type != EXCHANGED or data.get("parent_handoff_id") != handoff_id:
            continue
        keys = _keys_of(registry, str(data.get("to")))
        hop = Hop(
            str(data["jti"]), str(data["handoff_id"]), str(data["aud"]), str(data["to"]), keys
        )
        hops[hop.jti] = hop
    return hops


def _keys_of(registry: Registry | None, name: str) -> TrustedKeys:
    try:
        return pinned_keys(registry.get(name)) if registry is not None else TrustedKeys()
    except RegistryError:  # removed since: nothing verifies for it
        return TrustedKeys()


def witness_receipt(run: Run, agent: RegisteredAgent, record: HandoffRecord, task: Task) -> None:
    """The receipt of a terminal task that return admission does not judge (failed,
    cancelled, rejected): checked the same way, then kept, or its refusal recorded
    (``handoff.receipt_refused`` with the reason; the handoff has ended already)."""
    expected = expectation_for(run, agent, record)
    if expected is None or task.status.state not in TERMINAL_TASK_STATES:
        return
    checked = receipt_problem(task, expected)
    if isinstance(checked, str):
        run.emit(RECEIPT_REFUSED_EVENT, record, reason=checked)
        return
    keep_receipt(run, agent, record, checked)
    follow_successions(run, agent, task)


def follow_successions(run: Run, agent: RegisteredAgent, task: Task) -> None:
    """After a verified receipt: adopt the next key the agent announces with it, if a key
    pinned for it vouches for that key (:mod:`coordinator.remote.cards.key_succession`), so the
    next tokens are minted for it before the old key is retired."""
    extension = (task.metadata or {}).get(RECEIPTS_EXTENSION_URI)
    statements = successions_in(extension if isinstance(extension, Mapping) else None)
    if not statements or run.data is None:
        return
    trail = AuditTrail(run.trail.ledger, actor="coordinator")
    adopted = key_succession.follow(Registry(run.data, trail), agent.name, statements)
    if adopted is not None:
        logger.info("%s: adopted its next key %s", agent.name, adopted.verified_kid)


def keep_receipt(
    run: Run,
    agent: RegisteredAgent,
    record: HandoffRecord,
    receipt: CheckedReceipt,
    *,
    alone: bool = True,
) -> dict[str, Any]:
    """Keep a verified receipt and the remote's head it carries as witnessed (its row
    written with the handoff's next durable point). In the ledger it is a
    ``handoff.receipt`` event when ``alone``; otherwise the caller records the data
    returned in the verdict on the return the receipt came with (one event for both)."""
    kept = receipt_data(receipt.jws)
    if alone:
        run.emit(RECEIPT_EVENT, record, **kept)
    run.trail.write_with(_covered_row(run, record, receipt.artifacts))
    for hop in receipt.hops:
        run.emit(HOP_RECEIPT_EVENT, record, **receipt_data(hop.jws))
    if receipt.hop_refusal is not None:
        refused = receipt.hop_refusal
        run.emit(HOP_REFUSED_EVENT, record, reason=refused.reason, index=refused.index)
    stated = _stated_head(agent, receipt)
    if stated is not None:
        head, signer = stated
        run.trail.write_with(head_row(head, head.iss, WITNESSED, signer))
    return kept


def _stated_head(agent: RegisteredAgent, receipt: CheckedReceipt) -> tuple[Head, str] | None:
    """The head of ``agent``'s log the receipt states, and the thumbprint of the pinned key
    that verified it: from the receipt's log claims (verified with it), else from the
    older ``log_head`` (verified now); None when it states none, or states one that is
    refused (logged with the reason: the receipt's other facts stand)."""
    try:
        head = head_of_receipt(receipt.claims, receipt.signer, receipt.jws)
        if head is not None:
            return head, receipt.signer
        log_head = receipt.claims.get("log_head")
        return None if log_head is None else verify_head_signer(log_head, pinned_keys(agent))
    except StatementInvalid as exc:
        logger.warning(
            "the log head of %s's receipt is not kept (%s): %s", agent.name, exc.reason, exc
        )
        return None


def _covered_row(run: Run, record: HandoffRecord, content: str) -> Step:
    """Writes the exact artifacts a kept receipt covers as a row of ``artifacts``."""
    content_hash, size = content_digest(content)
    row = {
        "run_id": run.run_id,
        "attempt_id": record.attempt_id,
        "decision": COVERED_BY_RECEIPT,
        "reason": COVERED_BY_RECEIPT,
        "content_hash": content_hash,
        "size": size,
        "content": content,
        "received_at": timestamp(utc_now()),
    }

    def write(connection: Connection) -> None:
        driver.execute(connection, driver.insert_sql(artifacts.name, row), row)

    return write
