"""``federation audit reconcile RUN_ID``: do both sides of each handoff tell the same story?

For every handoff of the run sent to an agent that keeps an audit log (the receipts
extension), the remote's entries of that handoff are fetched from its operator routes
(``GET /audit/handoffs/{id}``), each checked to be included in the remote's signed tree
head (verified with the key pinned for the agent). Then, per handoff, the coordinator's
facts (the tokens it minted, the receipt it verified and kept, the task and state it
observed) are set beside the remote's (its decision and receipt entries): ``jti``,
``task_id``, ``req_digest``, ``artifact_digest``, ``state``, each ``agree`` or not.

The hops of the run's delegation chains (children minted by token exchange, the ledger's
``delegation.exchanged`` events) are compared too, each with the log of the agent the
child was minted for (asked the same way): the coordinator knows the token it minted, not
the message the holder sent with it (a child binds no request), so a hop compares ``jti``
with the remote's decision and its receipt.

And each side witnesses the other: the remote's current log must extend every head of it
the coordinator kept from receipts (``GET /audit/consistency?from=N``, verified here),
and the coordinator's ledger must extend every head of it the remote kept from tokens
(``GET /audit/witnessed?signer=...``, proven from this ledger). A forked log shows as
``inconsistent``.

Each remote is a counterparty, checked without trusting it:

* Its audit routes are asked with the credential the operator registered for THAT agent
  (:mod:`coordinator.remote.cards.audit_credentials`), at the origin of the card URL the
  operator registered it from, and nowhere else: not a URL from its card or a receipt,
  not through a proxy, no redirect followed. An agent with no credential is not asked;
  its handoffs and witness checks say ``audit_credential_missing``. There is no token
  for every agent: ``FEDERATION_REMOTE_AUDIT_TOKEN`` is never read or sent.
* The heads of its log that we hold are those verified with its pinned keys, looked up
  by those keys' thumbprints (:meth:`TreeHeadStore.witnessed`), never by the log name a
  receipt or head states: another agent's head naming its log is filed under that other
  agent's key and does not touch its verdict.
* What goes wrong with one remote (refused, unreachable, a head that does not verify) is
  that remote's typed ``reason`` in the report; the others are still reconciled.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from agent_cards.jws import segment_json
from agent_cards.transparency import merkle
from agent_cards.transparency.entries import RECEIPT_ENTRY, decision_in
from agent_cards.transparency.heads import Head
from contracts import strict_json
from contracts.request_digest import request_digest
from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import admission_in
from coordinator.audit.log.tree_heads import TreeHead
from coordinator.audit.receipts import compact, grant_recorded, records_receipt
from coordinator.authority.hops import EXCHANGED
from coordinator.errors import (
    AuditCredentialError,
    FederationError,
    ProtocolError,
)
from coordinator.remote.cards.audit_credentials import AuditCredentials
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.service.reconcile_verdict import (
    NO_RECEIPTS,
    NOT_REGISTERED,
    WITNESS_CHECKS,
    field,
    handoff_verdict,
    not_checked,
    witness_verdict,
)
from coordinator.service.reconcile_witness import (
    our_signers,
    ours_extends_their_heads,
    remote_extends_our_heads,
    witnessed_heads,
)
from coordinator.service.remote_audit import RemoteAudit

# Read by nothing any more: named so that the report can say it was ignored.
TOKEN_ENV = "FEDERATION_REMOTE_AUDIT_TOKEN"
FIELDS = ("jti", "task_id", "req_digest", "artifact_digest", "state")
# What both sides state before any receipt: the token the remote accepted, and for what.
DECISION_FIELDS = ("jti", "req_digest")
# What the owner knows of a hop: the child it minted (the holder chose the message).
HOP_FIELDS = ("jti",)
_NO_REQUEST = request_digest({})  # what a cancel token binds


# --- the coordinator's side ------------------------------------------------------------------


def _receipt_claims(receipt: Mapping[str, Any]) -> dict[str, Any]:
    claims: dict[str, Any] = segment_json(compact(receipt), 1)
    return claims


def sends_work(req_digest: Any) -> bool:
    """Whether a token with this request digest sent the handoff's work, rather than a
    cancel (whose token binds no request): both sides compare the token that sent it,
    whatever was logged after it."""
    return bool(req_digest != _NO_REQUEST)


def our_facts(ledger: Ledger, run_id: str) -> dict[str, dict[str, Any]]:
    """Per handoff: the agent it was sent to (the operator's name for it, as admitted),
    the audience, and what the ledger says of jti, task, digests, state."""
    facts: dict[str, dict[str, Any]] = {}
    for event in ledger.events(run_id):
        if event.handoff_id is None:
            continue
        blank = {"target": None, "aud": None, **dict.fromkeys(FIELDS)}
        mine = facts.setdefault(event.handoff_id, blank)
        admission = admission_in(event.event_type, event.data) or {}
        contract = admission.get("contract")
        if isinstance(contract, dict):
            mine["target"] = contract.get("target")
        if event.remote_task_id:
            mine["task_id"] = event.remote_task_id
        grant = grant_recorded(event.event_type, event.data)
        if grant is not None and sends_work(grant.get("req_digest")):
            mine.update(aud=grant.get("aud"), jti=grant.get("jti"))
            mine["req_digest"] = grant.get("req_digest")
        remote_state = event.data.get("remote_state")
        if isinstance(remote_state, str):
            mine["state"] = remote_state
        if records_receipt(event.event_type, event.data):
            claims = _receipt_claims(event.data["receipt"])
            mine.update({name: claims.get(name) for name in FIELDS}, receipted=True)
    return facts


def hop_facts(ledger: Ledger, run_id: str) -> dict[str, dict[str, Any]]:
    """Per hop granted by token exchange: the agent the child was minted for, its
    audience and ``jti``, the parent handoff and the depth."""
    facts: dict[str, dict[str, Any]] = {}
    for event in ledger.events(run_id):
        if event.event_type != EXCHANGED:
            continue
        data = event.data
        facts[str(data["handoff_id"])] = {
            "target": data.get("to"),
            "aud": data.get("aud"),
            "jti": data.get("jti"),
            "parent_handoff_id": data.get("parent_handoff_id"),
            "depth": data.get("depth"),
        }
    return facts


# --- the remote's side -----------------------------------------------------------------------


def _included(entry: Mapping[str, Any], head: Head) -> dict[str, Any] | None:
    """The entry's record if it is included in ``head``'s tree (hash and proof), else None."""
    canonical = str(entry.get("canonical", ""))
    digest = hashlib.sha256(canonical.encode("utf-8")).digest()
    proof = [bytes.fromhex(node) for node in entry.get("inclusion_proof", [])]
    seq = entry.get("seq")
    if digest.hex() != entry.get("hash") or not isinstance(seq, int):
        return None
    leaf = merkle.leaf_hash(digest)
    if not merkle.verify_inclusion(seq - 1, head.tree_size, leaf, proof, head.root):
        return None
    try:
        record: dict[str, Any] = strict_json.loads(canonical)
    except ValueError:  # a record no one can read (too deep, say) proves nothing
        return None
    return record


def their_facts(remote: RemoteAudit, handoff_id: str, hop: bool = False) -> dict[str, Any]:
    """What the remote's log says of ``handoff_id``, every entry proven in its head (of a
    ``hop``: the token it allowed binds no request)."""
    document = remote.get(f"/audit/handoffs/{handoff_id}")
    head = remote.head(document.get("tree_head"))
    theirs: dict[str, Any] = {**dict.fromkeys(FIELDS), "entries": 0, "proven": True}
    for entry in document.get("entries", []):
        record = _included(entry, head)
        if record is None:
            theirs["proven"] = False
            continue
        theirs["entries"] += 1
        decision = decision_in(record)  # an entry of its own, or riding on the receipt
        if decision is not None and decision.get("allowed") and _sent(decision, hop):
            theirs.update(jti=decision.get("jti"), req_digest=decision.get("req_digest"))
        if record.get("kind") == RECEIPT_ENTRY:
            data = record.get("data") or {}
            theirs.update({name: data.get(name) for name in FIELDS}, receipted=True)
    return theirs


def _sent(decision: Mapping[str, Any], hop: bool) -> bool:
    """Whether the token of an allowed decision sent the work: a first hop's binds its
    request (a cancel's binds none of its own); a child minted by exchange binds none."""
    digest = decision.get("req_digest")
    if hop:
        return digest is None
    return bool(digest) and sends_work(digest)


def compared(
    ours: Mapping[str, Any], theirs: Mapping[str, Any], hop: bool = False
) -> dict[str, Any]:
    """Each field on both sides, and the handoff's verdict (see :mod:`.reconcile_verdict`)."""
    receipted = bool(ours.get("receipted") or theirs.get("receipted"))
    names = HOP_FIELDS if hop else FIELDS if receipted else DECISION_FIELDS
    fields = {name: field(ours.get(name), theirs.get(name)) for name in names}
    proven = bool(theirs.get("proven"))
    recorded = bool(theirs.get("entries", 1))
    verdict = handoff_verdict(fields, proven, receipted, recorded)
    return {"fields": fields, "proven": proven, **verdict}


# --- one run ---------------------------------------------------------------------------------


class Reconciliation:
    """One run's reconcile: each receipts-declaring agent asked with its own credential."""

    def __init__(
        self,
        ledger: Ledger,
        credentials: AuditCredentials,
        jwks: Mapping[str, Any],
        current: TreeHead,
    ) -> None:
        self.ledger = ledger
        self.credentials = credentials
        self.jwks = jwks
        self.current = current
        self.remotes: dict[str, RemoteAudit | FederationError] = {}
        self.agents: dict[str, RegisteredAgent] = {}

    def remote(self, agent: RegisteredAgent) -> RemoteAudit | FederationError:
        """The agent's audit routes, or why they are not asked (no credential)."""
        if agent.name not in self.remotes:
            self.agents[agent.name] = agent
            try:
                credential = self.credentials.for_agent(agent)
                self.remotes[agent.name] = RemoteAudit(agent, credential)
            except AuditCredentialError as exc:
                self.remotes[agent.name] = exc
        return self.remotes[agent.name]

    def handoff(
        self, handoff_id: str, agent: RegisteredAgent, ours: Mapping[str, Any], hop: bool = False
    ) -> dict[str, Any]:
        """One handoff (a ``hop`` of a chain: its parent and depth said) compared."""
        remote = self.remote(agent)
        head = {"handoff_id": handoff_id, "agent": agent.name, "fields": {}, "proven": False}
        if hop:
            head.update(parent_handoff_id=ours.get("parent_handoff_id"), depth=ours.get("depth"))
        if isinstance(remote, FederationError):
            return {**head, **_refused(remote)}
        try:
            theirs = their_facts(remote, handoff_id, hop)
        except FederationError as exc:
            return {**head, **_refused(exc)}
        except MALFORMED:
            return {**head, **_refused(_malformed(agent.name))}
        return {**head, **compared(ours, theirs, hop)}

    def witness(self, name: str) -> dict[str, Any]:
        witness = self._witness(name)
        return {**witness, "verdict": witness_verdict(witness)}

    def _witness(self, name: str) -> dict[str, Any]:
        remote = self.remotes[name]
        if isinstance(remote, FederationError):
            return {"agent": name, **_no_checks(), **_refused(remote)}
        try:
            return {
                "agent": name,
                "remote_log_extends_heads_we_hold": remote_extends_our_heads(
                    remote, witnessed_heads(self.ledger, remote)
                ),
                "our_ledger_extends_heads_it_holds": ours_extends_their_heads(
                    self.ledger, self._their_heads(remote), self.jwks, self.current
                ),
                "reason": None,
            }
        except FederationError as exc:
            return {"agent": name, **_no_checks(), **_refused(exc)}
        except MALFORMED:
            return {"agent": name, **_no_checks(), **_refused(_malformed(name))}

    def _their_heads(self, remote: RemoteAudit) -> list[Any]:
        document = remote.get("/audit/witnessed", signer=our_signers(self.jwks))
        heads = document.get("heads", [])
        return heads if isinstance(heads, list) else []

    def witnesses(self) -> list[dict[str, Any]]:
        return [self.witness(name) for name in sorted(self.remotes)]


def skipped(
    handoff_id: str, ours: Mapping[str, Any], agent: RegisteredAgent | None
) -> dict[str, Any]:
    """A handoff not compared at all: its agent is no longer registered, or keeps no
    receipts (so no audit log of it to compare with)."""
    name = agent.name if agent is not None else str(ours.get("target") or ours.get("aud"))
    head = {"handoff_id": handoff_id, "agent": name, "fields": {}, "proven": False}
    head.update({key: ours[key] for key in ("parent_handoff_id", "depth") if key in ours})
    if agent is None:
        detail = f"{name} is no longer registered: there is no one to ask"
        return {**head, **not_checked(NOT_REGISTERED, detail)}
    detail = f"{name} keeps no receipts (its card declares no receipts extension)"
    return {**head, **not_checked(NO_RECEIPTS, detail)}


def target_of(ours: Mapping[str, Any], agents: Sequence[RegisteredAgent]) -> RegisteredAgent | None:
    """The registered agent a handoff went to: by the name it was admitted for, else
    (a ledger without it) by the audience its token was minted for."""
    by_name = {agent.name: agent for agent in agents}
    if ours.get("target") in by_name:
        return by_name[ours["target"]]
    if ours.get("target") is not None:
        return None  # sent to an agent no longer registered
    return next((agent for agent in agents if agent.agent_id == ours.get("aud")), None)


# What reading a remote's document of the wrong shape raises (a member of another type).
MALFORMED = (ValueError, TypeError, AttributeError, KeyError, IndexError)


def _malformed(name: str) -> ProtocolError:
    return ProtocolError(
        f"{name}'s audit answer is not of the documented shape", "audit_answer_invalid"
    )


def _no_checks() -> dict[str, list[Any]]:
    return {key: [] for key in WITNESS_CHECKS}


def _refused(error: FederationError) -> dict[str, Any]:
    """A check not made: why (never the credential; messages do not carry it)."""
    return not_checked(error.reason, str(error))


def ignored_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """A note when the retired shared token is still set: it was not sent to anyone."""
    if not environ.get(TOKEN_ENV):
        return {}
    return {
        "notes": [
            f"{TOKEN_ENV} is set and was ignored: it is sent to no agent. Register each "
            "agent's own: federation agents audit-credential NAME --token-file FILE"
        ]
    }
