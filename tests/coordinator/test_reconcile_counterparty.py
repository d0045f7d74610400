"""``audit reconcile`` against a counterparty that lies: secrets per agent, heads by signer.

A real remote_risk process and a rogue agent (tests/rogue_agent.py: its own key, its own
signed card declaring the receipts extension) are registered in one coordinator data
directory. The rogue's receipts verify (they are signed with its pinned key over what it
answered) but their tree head names remote_risk's log. The coordinator's CLI runs each
reconcile as a real process.

* remote_risk's audit credential is sent to remote_risk's pinned origin only: the rogue,
  in the same run, records every request to its ``/audit`` routes and sees none (nor
  ``FEDERATION_REMOTE_AUDIT_TOKEN``, which is never sent); given a credential of its
  own, it sees exactly that one.
* The rogue's head is kept under the rogue's key (its RFC 7638 thumbprint), so it cannot
  change the verdict on remote_risk's runs: they still ``agree``.
* An agent with no credential: the report says ``audit_credential_missing``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey
from agent_cards.transparency.heads import sign_head
from contracts.returns import finding_contract
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.audit.log.signing import public_jwk
from coordinator.audit.log.tree_heads import sign_tree_head
from coordinator.authority.delegator import Delegator, RunAuthority
from coordinator.authority.identity import coordinator_keys, issuer_id
from coordinator.dispatch.attempt.driver import RemoteOutcome, WaitPolicy, propose
from coordinator.dispatch.attempts import run_remote_handoff
from coordinator.handoff.run import start_run
from coordinator.remote.cards.audit_credentials import CREDENTIALS_FILE, EXPOSED, AuditCredentials
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.service.reconcile import Reconciliation
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.coordinator.test_api import deployed
from tests.processes import PAYLOAD, RemoteRiskProcess, federation, registered
from tests.rogue_agent import Rogue, rogue_agent
from tests.servers import running

RISK_TOKEN = "remote-risk-audit-operator-token"
ROGUE_TOKEN = "the-rogues-own-audit-token"
DECLARED = {RISK_SKILL: finding_contract(source="registration")}


@pytest.fixture
def federation_of_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[DataDir, RemoteRiskProcess, Rogue]]:
    """remote_risk (audit token RISK_TOKEN) and the rogue, both registered."""
    monkeypatch.setenv("REMOTE_RISK_AUDIT_TOKEN", RISK_TOKEN)
    with registered(tmp_path) as (data, risk):
        victim_log = Registry(data).get("remote-risk").agent_id
        with rogue_agent(victim_log) as rogue:
            register_rogue(data, rogue)
            yield data, risk, rogue


def register_rogue(data: DataDir, rogue: Rogue) -> None:
    async def register() -> None:
        async with A2AClient() as client:
            await Registry(data).register(
                client, rogue.base, anchor=TrustAnchor(keys=rogue.anchor_keys),
                return_contracts=DECLARED,
            )  # fmt: skip

    asyncio.run(register())


def one_run_to(data: DataDir, *names: str) -> str:
    """One run with a handoff to each agent named, each ACCEPTED."""
    run_id, outcomes = handoffs_in_one_run(data, *names)
    for outcome in outcomes:
        assert outcome.record.state.value == "ACCEPTED", outcome.record.reason
    return run_id


def handoffs_in_one_run(data: DataDir, *names: str) -> tuple[str, list[RemoteOutcome]]:
    """One run with a handoff to each agent named, driven to its end in this process."""

    async def drive() -> tuple[str, list[RemoteOutcome]]:
        ws = Workspace(data)
        try:
            authority = RunAuthority(scopes=frozenset({"risk:interpret"}))
            run = start_run(ws, "operator", authority=authority, kind="delegation")
            expires = int(run.book.parent.expires_at.timestamp())
            keys = coordinator_keys(data)
            delegator = Delegator(keys, authority, issuer_id(), run.run_id, expires, run.owner)
            wait = WaitPolicy(deadline_seconds=20)
            outcomes = []
            async with A2AClient() as client:
                for name in names:
                    agent = Registry(data).get(name)
                    proposal = propose(run, agent, RISK_SKILL, PAYLOAD, wait)
                    outcomes.append(
                        await run_remote_handoff(
                            client, agent, proposal, PAYLOAD, run=run, wait=wait,
                            delegator=delegator,
                        )
                    )  # fmt: skip
            run.trail.flush()
            return run.run_id, outcomes
        finally:
            ws.close()

    return asyncio.run(asyncio.wait_for(drive(), 60))


def reconcile(data: DataDir, run_id: str, **env: str) -> tuple[int, dict[str, Any], str]:
    """The CLI's report (``{}`` when it printed none: its error is the third item)."""
    process = federation(data.root, "audit", "reconcile", run_id, "--json", **env)
    out, err = process.communicate(timeout=60)
    return process.returncode, json.loads(out) if out else {}, err


def set_credential(data: DataDir, name: str, token: str, tmp_path: Path) -> str:
    secret = tmp_path / f"{name}.token"
    secret.write_text(token + "\n")
    process = federation(data.root, "agents", "audit-credential", name, "--token-file", str(secret))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert token not in out + err  # never printed
    return out


def by_agent(document: dict[str, Any], key: str) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for entry in document[key]:
        grouped.setdefault(entry["agent"], []).append(entry)
    return grouped


def test_remote_risks_credential_never_reaches_the_rogue_in_the_same_run(
    federation_of_two: tuple[DataDir, RemoteRiskProcess, Rogue], tmp_path: Path
) -> None:
    """One run, a handoff to each. The shared env token is set, as an operator of the
    old reconcile would have it: it is sent to nobody. With remote_risk's credential
    registered, remote_risk's handoff agrees, the rogue's says it has no credential,
    and the rogue has received nothing; given its own, it receives that one only."""
    data, _, rogue = federation_of_two
    run_id = one_run_to(data, "remote-risk", "rogue")

    _, document, err = reconcile(data, run_id, FEDERATION_REMOTE_AUDIT_TOKEN=RISK_TOKEN)
    assert rogue.audit_requests == []
    assert document["agree"] is False, err

    set_credential(data, "remote-risk", RISK_TOKEN, tmp_path)
    status, document, _ = reconcile(data, run_id, FEDERATION_REMOTE_AUDIT_TOKEN=RISK_TOKEN)
    assert rogue.audit_requests == []
    handoffs = by_agent(document, "handoffs")
    assert [h["agree"] for h in handoffs["remote-risk"]] == [True], handoffs
    assert [h["reason"] for h in handoffs["rogue"]] == ["audit_credential_missing"]
    witnesses = by_agent(document, "witnesses")
    assert witnesses["rogue"][0]["reason"] == "audit_credential_missing"
    assert status == 5 and document["verdict"] == "not_checked"

    set_credential(data, "rogue", ROGUE_TOKEN, tmp_path)
    reconcile(data, run_id, FEDERATION_REMOTE_AUDIT_TOKEN=RISK_TOKEN)
    assert rogue.audit_requests
    assert {auth for _, auth in rogue.audit_requests} == {f"Bearer {ROGUE_TOKEN}"}


def test_a_rogue_head_naming_remote_risks_log_leaves_remote_risks_reconcile_agree(
    federation_of_two: tuple[DataDir, RemoteRiskProcess, Rogue], tmp_path: Path
) -> None:
    """The rogue's receipt carries a head it signed stating remote_risk's log (size 1,
    another root): a signature speaks only for its key's identity, so the head is not
    kept at all (it names another issuer). Runs with remote_risk before and after it
    still reconcile ``agree``."""
    data, _, rogue = federation_of_two
    set_credential(data, "remote-risk", RISK_TOKEN, tmp_path)
    before = one_run_to(data, "remote-risk")
    one_run_to(data, "rogue")
    after = one_run_to(data, "remote-risk")

    for run_id in (before, after):
        status, document, err = reconcile(data, run_id)
        assert (status, document["agree"]) == (0, True), (document, err)
        (witness,) = document["witnesses"]
        assert witness["remote_log_extends_heads_we_hold"]
        assert all(c["consistent"] for c in witness["remote_log_extends_heads_we_hold"])

    with sqlite3.connect(data.path("federation.db")) as connection:
        signers = {
            log_id: signer
            for log_id, signer in connection.execute(
                "SELECT log_id, signer FROM tree_heads WHERE origin = 'witnessed'"
                " AND root_hash = ?",
                ("66" * 32,),
            )
        }
    assert signers == {}, (rogue.victim_log, rogue.key.kid)


def test_a_reconcile_against_an_agent_with_no_credential_says_so(
    federation_of_two: tuple[DataDir, RemoteRiskProcess, Rogue],
) -> None:
    """No credential registered for remote_risk: nothing is asked of it, and the report
    says why (not checked: exit 5, not an error, not a disagreement)."""
    data, _, _ = federation_of_two
    run_id = one_run_to(data, "remote-risk")
    status, document, _ = reconcile(data, run_id, FEDERATION_REMOTE_AUDIT_TOKEN=RISK_TOKEN)
    assert status == 5 and document["verdict"] == "not_checked"
    (handoff,) = document["handoffs"]
    assert (handoff["agent"], handoff["agree"], handoff["reason"]) == (
        "remote-risk",
        False,
        "audit_credential_missing",
    )
    (witness,) = document["witnesses"]
    assert witness["reason"] == "audit_credential_missing"


def test_a_credential_set_through_the_api_is_kept_for_its_agent_and_never_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PUT answers whose it is and where it goes, never the token; nothing the API shows
    of the agent carries it; a token that cannot travel in a header is refused (422); an
    unknown agent is 404; DELETE forgets it."""
    for name in ("FEDERATION_SERVER", "FEDERATION_OPERATOR_TOKEN", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with deployed(DataDir(tmp_path / "data")) as deployment:
        assert deployment.register().status_code == 200
        path = "/v1/agents/remote-risk/audit-credential"
        answer = deployment.http.put(path, json={"token": RISK_TOKEN})
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "agent": "remote-risk",
            "origin": deployment.risk,
            "set": True,
            "removed": None,
        }
        shown = [answer.text, deployment.http.get("/v1/agents/remote-risk").text]
        shown.append(deployment.http.get("/v1/agents").text)
        assert all(RISK_TOKEN not in text for text in shown)
        assert (deployment.data / "audit-credentials.json").stat().st_mode & 0o077 == 0
        bad = deployment.http.put(path, json={"token": "two words"})
        assert bad.status_code == 422
        unknown = deployment.http.put("/v1/agents/nobody/audit-credential", json={"token": "t"})
        assert unknown.status_code == 404
        gone = deployment.http.delete(path)
        assert gone.status_code == 200 and gone.json()["removed"] is True


class Recorder:
    """A loopback server that records every request's path and Authorization, and
    answers 401 to all of them (or 200 with ``answer``)."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.answer = answer

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization")
        self.seen.append((scope["path"], authorization.decode() if authorization else None))
        status = 401 if self.answer is None else 200
        body = json.dumps(self.answer).encode() if self.answer is not None else b""
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})


def test_the_credential_goes_to_the_registered_card_origin_not_to_the_cards_interface(
    tmp_path: Path,
) -> None:
    """The agent is registered from origin A; its card names its interface at origin B.
    Reconcile sends the credential to A only: B, named by the card, sees nothing."""
    card_origin, interface_origin = Recorder(), Recorder()
    with running(card_origin) as a, running(interface_origin) as b:
        registered_agent = RegisteredAgent(
            name="elsewhere",
            card_url=f"{a}/.well-known/agent-card.json",
            endpoint=f"{b}/rpc",
            card={},
            registered_at="2026-01-01T00:00:00Z",
            pinned_jwks={"keys": [SigningKey.generate().public_jwk()]},
        )
        data = DataDir(tmp_path)
        AuditCredentials(data).set(registered_agent, ROGUE_TOKEN)
        ws = Workspace(data)
        try:
            key = Ed25519PrivateKey.generate()
            current = sign_tree_head(0, b"\x00" * 32, key)
            checks = Reconciliation(
                ws.ledger(), AuditCredentials(data), {"keys": [public_jwk(key)]}, current
            )
            checked = checks.handoff("ho-1", registered_agent, {})
            witnessed = checks.witnesses()
        finally:
            ws.close()
    assert checked["reason"] == "remote_audit_refused" and checked["agree"] is False
    assert witnessed[0]["reason"] == "remote_audit_refused"
    assert interface_origin.seen == []
    assert card_origin.seen and {auth for _, auth in card_origin.seen} == {f"Bearer {ROGUE_TOKEN}"}


def test_an_audit_answer_of_the_wrong_shape_is_that_agents_typed_reason(tmp_path: Path) -> None:
    """A head that verifies with the agent's pinned key over entries that are not
    entries: the handoff says audit_answer_invalid; no traceback, no crash."""
    key = SigningKey.generate()
    head = sign_head(1, b"\x01" * 32, key, identity_of(key.verification_key())).jws
    liar = Recorder({"tree_head": head, "entries": [1, "two"], "heads": {"not": "a list"}})
    with running(liar) as base:
        agent = RegisteredAgent(
            name="liar",
            card_url=f"{base}/.well-known/agent-card.json",
            endpoint=f"{base}/rpc",
            card={},
            registered_at="2026-01-01T00:00:00Z",
            pinned_jwks={"keys": [key.public_jwk()]},
        )
        data = DataDir(tmp_path)
        AuditCredentials(data).set(agent, ROGUE_TOKEN)
        ws = Workspace(data)
        try:
            ours = Ed25519PrivateKey.generate()
            checks = Reconciliation(
                ws.ledger(),
                AuditCredentials(data),
                {"keys": [public_jwk(ours)]},
                sign_tree_head(0, b"\x00" * 32, ours),
            )
            checked = checks.handoff("ho-1", agent, {})
        finally:
            ws.close()
    assert (checked["agree"], checked["reason"]) == (False, "audit_answer_invalid")


def test_a_credentials_file_others_can_read_is_not_used(
    federation_of_two: tuple[DataDir, RemoteRiskProcess, Rogue], tmp_path: Path
) -> None:
    """The credentials file is written 0600. If it is later made readable by others (a
    careless chmod, a copy kept with its mode), its tokens may have been read: none is
    sent, as ssh refuses a private key others can read, and each agent's report says why
    until the operator sets them again (which writes the file 0600 anew)."""
    data, _, rogue = federation_of_two
    run_id = one_run_to(data, "rogue")
    set_credential(data, "rogue", ROGUE_TOKEN, tmp_path)
    credentials = data.path(CREDENTIALS_FILE)
    credentials.chmod(0o644)
    status, document, _ = reconcile(data, run_id)
    assert rogue.audit_requests == []
    assert [h["reason"] for h in by_agent(document, "handoffs")["rogue"]] == [EXPOSED]
    assert status == 5

    set_credential(data, "rogue", ROGUE_TOKEN, tmp_path)
    assert credentials.stat().st_mode & 0o777 == 0o600
    reconcile(data, run_id)
    assert {auth for _, auth in rogue.audit_requests} == {f"Bearer {ROGUE_TOKEN}"}
