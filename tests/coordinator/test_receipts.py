"""The receipts extension: a remote that declares it must sign what it answered.

A small A2A server started in the test declares the receipts extension in its (signed,
pinned) card and returns a completed task with a receipt. Honest, the handoff is
ACCEPTED and the receipt is kept in the ledger. A remote that changes the artifact after
signing, signs with another key, names another handoff, or sends no receipt is refused
before its artifact is judged, with the reason.

The head of the remote's log a receipt states is kept as a witnessed head, whichever
form states it: the receipt's own log claims (one signature), or an older remote's
separately signed ``log_head``. Reconcile reads either back, re-verified with the pinned
key. Malformed log claims do not refuse the receipt (its facts verified): they state no
head, and none is kept (``log_claims_invalid``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey, TrustedKeys
from agent_cards.signing import sign_card
from agent_cards.transparency.heads import sign_head
from agent_cards.transparency.logged import log_claims
from agent_cards.transparency.receipts import (
    RECEIPTS_EXTENSION_URI,
    Bound,
    issue_receipt,
    receipt_claims,
)
from contracts.handoff import HandoffState
from contracts.returns import finding_contract
from contracts.wire import Task, to_wire
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.audit.log.signing import public_jwk
from coordinator.audit.log.tree_heads import TreeHead, TreeHeadStore
from coordinator.audit.proofs import prove_run
from coordinator.audit.receipts import RECEIPT_EVENT, compact, records_receipt
from coordinator.dispatch.attempt.driver import RemoteOutcome, WaitPolicy, propose
from coordinator.dispatch.attempts import run_remote_handoff
from coordinator.handoff.receipt_check import ReceiptExpectation, receipt_problem
from coordinator.handoff.run import Run
from coordinator.remote.cards.audit_credentials import AuditCredential
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.service.reconcile_witness import witnessed_heads
from coordinator.service.remote_audit import RemoteAudit
from coordinator.storage.datadir import DataDir
from tests.processes import federation
from tests.runs import new_run
from tests.servers import running

SENT = {"brief": {"id": "brief-001"}, "policy_note": {"id": "risk-policy-007"}}
CONTRACT = finding_contract({"brief-001", "risk-policy-007"})
FINDING = {
    "status": "ok",
    "summary": "Policy forbids refund execution.",
    "facts": {"refund_execution_permitted": False, "privacy_review_required": False},
    "evidenceIds": ["risk-policy-007"],
}
CARD_KEY = SigningKey.generate()
OTHER_KEY = SigningKey.generate()
PINNED = TrustAnchor(keys=TrustedKeys.from_json(CARD_KEY.public_jwk()))
# The ``iss`` a mode's receipt states other than its signer's identity: its URL (the old
# habit), or another agent's identity (what a rogue with its own pinned key would claim).
ISSUERS = {
    "url-issuer": "http://127.0.0.1/url-issuer/rpc",
    "names-another": identity_of(OTHER_KEY.verification_key()),
}
IDENTITY = identity_of(CARD_KEY.verification_key())
LOG_ROOT = bytes.fromhex("5a" * 32)
# What a mode's receipt states of the remote's log: its size and root as claims of the
# receipt (what a member sends now), a separately signed head (an older member), or
# malformed claims.
LOGS: dict[str, dict[str, Any]] = {
    "log-claims": log_claims(3, LOG_ROOT),
    "log-head": {"log_head": sign_head(3, LOG_ROOT, CARD_KEY, IDENTITY).jws},
    "log-size-text": {"log_tree_size": "3", "log_root_hash": LOG_ROOT.hex()},
    "log-root-short": {"log_tree_size": 3, "log_root_hash": "5a" * 31},
}


def card(base: str, mode: str) -> dict[str, Any]:
    return {
        "name": f"receipts-{mode}",
        "description": "signs what it answers, or pretends to",
        "supportedInterfaces": [
            {"url": f"{base}/{mode}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "version": "1",
        "capabilities": {"extensions": [{"uri": RECEIPTS_EXTENSION_URI, "required": False}]},
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{"id": RISK_SKILL, "name": "r", "description": "r", "tags": []}],
    }


def completed(summary: str) -> dict[str, Any]:
    artifact = {"artifactId": "a1", "parts": [{"data": {**FINDING, "summary": summary}}]}
    return {
        "id": "task-1",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00.000Z"},
        "artifacts": [artifact],
    }


class Remote:
    """Answers every send with a completed task; ``mode`` says how it signs it."""

    def __init__(self) -> None:
        self.base = ""

    async def card(self, request: Request) -> Response:
        return JSONResponse(sign_card(card(self.base, request.path_params["mode"]), CARD_KEY))

    async def rpc(self, request: Request) -> Response:
        mode = request.path_params["mode"]
        envelope = json.loads(await request.body())
        metadata = envelope["params"].get("message", {}).get("metadata", {})
        binding = {"handoffId": metadata.get("handoffId"), "attempt": metadata.get("attempt")}
        task = {**completed("Policy forbids refund execution."), "metadata": binding}
        if mode == "failed":  # fails the task, yet returns an artifact with it
            task["status"] = {**task["status"], "state": "TASK_STATE_FAILED"}
        if mode != "missing":
            task["metadata"] = {
                **binding,
                RECEIPTS_EXTENSION_URI: {"receipt": self.sign(task, mode)},
            }
        if mode == "changed":  # the artifact changed after the receipt was signed
            task["artifacts"] = completed("Policy permits refund execution.")["artifacts"]
        result = {"task": task} if envelope["method"] == "SendMessage" else task
        return JSONResponse({"jsonrpc": "2.0", "id": envelope["id"], "result": result})

    def sign(self, task: dict[str, Any], mode: str) -> str:
        binding = task["metadata"]
        handoff = "ho-someone-else" if mode == "other-handoff" else binding["handoffId"]
        bound = Bound(handoff_id=handoff, attempt=binding["attempt"], jti=None, req_digest=None)
        claims = receipt_claims(task, bound, ISSUERS.get(mode, IDENTITY))
        claims.update(LOGS.get(mode, {}))
        return issue_receipt(claims, OTHER_KEY if mode == "other-key" else CARD_KEY)


@pytest.fixture(scope="module")
def remote() -> Iterator[Remote]:
    service = Remote()
    app = Starlette(
        routes=[
            Route("/{mode}/.well-known/agent-card.json", service.card),
            Route("/{mode}/rpc", service.rpc, methods=["POST"]),
        ]
    )
    with running(app) as url:
        service.base = url
        yield service


def delegate(remote: Remote, mode: str, tmp_path: Path, run: Run) -> RemoteOutcome:
    async def go() -> RemoteOutcome:
        async with A2AClient() as client:
            registry = Registry(DataDir(tmp_path))
            registered = await registry.register(client, f"{remote.base}/{mode}", anchor=PINNED)
            agent = registered.agent
            wait = WaitPolicy(deadline_seconds=5, first_poll=0.05, max_poll=0.1, max_attempts=1)
            proposal = propose(run, agent, RISK_SKILL, SENT, wait, contract=CONTRACT)
            return await run_remote_handoff(client, agent, proposal, SENT, run=run, wait=wait)

    return asyncio.run(asyncio.wait_for(go(), 30))


def receipts_in_ledger(run: Run) -> list[dict[str, Any]]:
    run.trail.flush()
    assert run.trail.ledger is not None
    events = run.trail.ledger.events(run.run_id)
    return [e.data for e in events if records_receipt(e.event_type, e.data)]


def test_an_honest_receipt_is_verified_and_kept(remote: Remote, tmp_path: Path) -> None:
    """Signed with the pinned card key over the artifacts returned: ACCEPTED, and the
    receipt (flattened JWS and its kid) is in the verdict's event (no handoff.receipt of
    its own)."""
    run = new_run(owner="coordinator")
    outcome = delegate(remote, "honest", tmp_path, run)
    assert outcome.record.state is HandoffState.ACCEPTED, outcome.record.reason
    (kept,) = receipts_in_ledger(run)
    assert kept["content_hash"] == outcome.admission.content_hash
    assert RECEIPT_EVENT not in [e.event_type for e in run.trail.ledger.events(run.run_id)]
    assert kept["kid"] == CARD_KEY.kid and set(kept["receipt"]) == {
        "protected",
        "payload",
        "signature",
    }


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("changed", "receipt_mismatch"),
        ("other-key", "receipt_invalid"),
        ("other-handoff", "receipt_mismatch"),
        ("missing", "receipt_missing"),
        ("names-another", "receipt_issuer_mismatch"),
        ("url-issuer", "receipt_issuer_mismatch"),
    ],
)
def test_a_receipt_that_does_not_vouch_for_the_answer_is_refused(
    remote: Remote, tmp_path: Path, mode: str, reason: str
) -> None:
    """The remote declares receipts, so a bad or absent one refuses the return: REJECTED
    with the reason, nothing admitted, no receipt kept."""
    run = new_run(owner="coordinator")
    outcome = delegate(remote, mode, tmp_path, run)
    assert (outcome.record.state, outcome.record.reason) == (HandoffState.REJECTED, reason)
    assert outcome.finding is None
    assert receipts_in_ledger(run) == []


def test_a_failed_task_with_artifacts_proves_with_the_artifacts_its_receipt_covers(
    remote: Remote, tmp_path: Path
) -> None:
    """A remote fails the task and returns an artifact with it, under an honest receipt.
    Return admission never judges it, yet the receipt is kept, and so are the exact
    artifacts it covers: the run's genuine proof bundle carries them, and
    ``federation audit verify --bundle`` with the reader's own keys says ok."""
    run = new_run(owner="coordinator")
    outcome = delegate(remote, "failed", tmp_path, run)
    assert outcome.record.state is HandoffState.FAILED, outcome.record.reason
    assert len(receipts_in_ledger(run)) == 1
    ledger = run.trail.ledger
    assert ledger is not None
    coordinator = Ed25519PrivateKey.generate()
    remote_keys = [CARD_KEY.public_jwk()]
    bundle = prove_run(ledger, run.run_id, coordinator, remote_keys=remote_keys)
    (carried,) = bundle["artifacts"]
    assert json.loads(carried["content"])[0]["artifactId"] == "a1"
    files = {"bundle.json": bundle, "coordinator.jwk": public_jwk(coordinator)}
    files["remote.jwk"] = CARD_KEY.public_jwk()
    for name, document in files.items():
        (tmp_path / name).write_text(json.dumps(document))
    checked = federation(
        tmp_path / "reader",
        *("audit", "verify", "--bundle", str(tmp_path / "bundle.json")),
        *("--coordinator-key", str(tmp_path / "coordinator.jwk")),
        *("--remote-key", str(tmp_path / "remote.jwk")),
    )
    out, err = checked.communicate(timeout=60)
    assert checked.returncode == 0, out + err


def test_a_receipt_by_a_second_pinned_key_is_not_in_the_audiences_name() -> None:
    """An agent with two pinned keys: its tokens' audience is the identity of the one that
    verified its card. A receipt signed by the other, naming that other key's identity,
    is its signer's, not the audience's: refused; naming the audience, it is no longer
    its signer's: refused too. Only the signer that is the audience passes."""
    task = Task.model_validate({**completed("Policy forbids refund execution."), "metadata": {}})
    keys = TrustedKeys.from_json({"keys": [CARD_KEY.public_jwk(), OTHER_KEY.public_jwk()]})
    audience = identity_of(CARD_KEY.verification_key())
    expected = ReceiptExpectation(keys, "ho-1", 1, {}, audience=audience)

    def verdict(signer: SigningKey, issuer: str) -> str:
        bound = Bound(handoff_id="ho-1", attempt=1, jti=None, req_digest=None)
        claims = receipt_claims(to_wire(task), bound, issuer)
        receipt = issue_receipt(claims, signer)
        signed = task.model_copy(
            update={"metadata": {RECEIPTS_EXTENSION_URI: {"receipt": receipt}}}
        )
        checked = receipt_problem(signed, expected)
        return checked if isinstance(checked, str) else "kept"

    assert verdict(OTHER_KEY, identity_of(OTHER_KEY.verification_key())) == (
        "receipt_issuer_mismatch"
    )
    assert verdict(OTHER_KEY, audience) == "receipt_issuer_mismatch"
    assert verdict(CARD_KEY, audience) == "kept"


def witnessed_statements(run: Run, tmp_path: Path, mode: str) -> tuple[list[TreeHead], list[str]]:
    """The remote's heads the run's ledger kept (filed under the card key's thumbprint),
    and what reconcile reads back of them: each statement re-verified with the pinned key."""
    ledger = run.trail.ledger
    assert ledger is not None
    kept = TreeHeadStore(ledger.engine).witnessed({CARD_KEY.kid})
    agent = Registry(DataDir(tmp_path)).get(f"receipts-{mode}")
    remote = RemoteAudit(agent, AuditCredential(agent.name, "http://127.0.0.1", "unused"))
    return kept, [head.jws for head in witnessed_heads(ledger, remote)]


@pytest.mark.parametrize("mode", ["log-claims", "log-head"])
def test_the_remotes_log_is_witnessed_from_either_form_of_receipt(
    remote: Remote, tmp_path: Path, mode: str
) -> None:
    """A receipt stating the remote's log (claims of its own, or the older ``log_head``):
    ACCEPTED, and the head it states is kept as witnessed, its proof the statement that
    states it (the receipt itself, or the head); reconcile re-verifies and reads it."""
    run = new_run(owner="coordinator")
    outcome = delegate(remote, mode, tmp_path, run)
    assert outcome.record.state is HandoffState.ACCEPTED, outcome.record.reason
    (kept,) = receipts_in_ledger(run)
    receipt = compact(kept["receipt"])
    statement = receipt if mode == "log-claims" else LOGS[mode]["log_head"]
    heads, read_back = witnessed_statements(run, tmp_path, mode)
    (head,) = [head for head in heads if head.jws == statement]
    assert (head.iss, head.tree_size, head.root_hash, head.kid) == (
        IDENTITY,
        3,
        LOG_ROOT.hex(),
        CARD_KEY.kid,
    )
    assert statement in read_back


@pytest.mark.parametrize("mode", ["log-size-text", "log-root-short"])
def test_malformed_log_claims_keep_the_receipt_but_no_head(
    remote: Remote, tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The receipt's facts verified, so the return is admitted and the receipt kept; its
    log claims state no head: none is kept, and the reason is logged."""
    run = new_run(owner="coordinator")
    outcome = delegate(remote, mode, tmp_path, run)
    assert outcome.record.state is HandoffState.ACCEPTED, outcome.record.reason
    (kept,) = receipts_in_ledger(run)
    heads, _ = witnessed_statements(run, tmp_path, mode)
    assert compact(kept["receipt"]) not in [head.jws for head in heads]
    assert "log_claims_invalid" in caplog.text
