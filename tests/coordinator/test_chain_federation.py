"""Three services, three processes: the coordinator's API, the privacy team's member
(examples/chain_member.py) and the legal team's (examples/terms_member.py), both built
with the member kit, on loopback.

The operator delegates to the privacy team; its skill sub-delegates to the legal team
with one call (member_kit.trust.chain.delegate), which exchanges its token at the owner
for a child and sends the A2A message with it. The child's budget is carved out of the
privacy team's exactly, the hop is in the run document (``run show``), in ``audit show``
and in the run's proof bundle, which verifies every hop with each party's own key (the
legal team's receipt, carried up by the kit, included); with the legal team down, the
privacy team's handoff fails naming the cause.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_cards.keys import load_key_set
from agent_cards.transparency.receipts import verified_receipt
from coordinator.audit.anchors import Anchors
from coordinator.audit.log.events import admission_in
from coordinator.audit.proof_check import verify_proof_bundle
from coordinator.audit.receipts import compact
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.cli.printers import render_document, render_reconstruction
from tests.chains import CHAIN_EXAMPLE, OPERATOR, PRIVACY, REVIEW_SKILL, TERMS
from tests.coordinator.served import served
from tests.members import TERMS_EXAMPLE

INPUT = {"text": "Refunds are handled by the support team.", "terms": ["refund", "warranty"]}
ACCEPT_ANY_OBJECT = {"type": "object"}


@dataclass
class Member:
    process: subprocess.Popen[str]
    url: str
    log: Path
    data_dir: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextmanager
def member(script: Path, data_dir: Path, *args: str) -> Iterator[Member]:
    """``python <script>`` on a free port; its first line names where it listens."""
    log = data_dir.with_suffix(".log")
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(script), "--port", "0", "--data-dir", str(data_dir), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    running = Member(process, first.rpartition(" ")[2], log, data_dir)
    try:
        assert " listening on http://127.0.0.1:" in first, log.read_text()
        yield running
    finally:
        running.stop()


@dataclass
class Federation:
    url: str
    terms: Member
    privacy: Member
    client: httpx.Client

    def delegate(self) -> dict[str, Any]:
        body = {"to": PRIVACY, "skill": REVIEW_SKILL, "input": INPUT, "timeout": 60}
        answer = self.client.post(f"{self.url}/v1/delegations", json=body, headers=OPERATOR)
        assert answer.status_code == 200, answer.text
        document: dict[str, Any] = answer.json()
        return document

    def get(self, path: str) -> Any:
        answer = self.client.get(self.url + path, headers=OPERATOR)
        assert answer.status_code == 200, answer.text
        return answer.json()


def register(client: httpx.Client, url: str, base_url: str, name: str, skill: str) -> None:
    body = {
        "url": base_url,
        "name": name,
        "trust_on_first_use": True,
        "return_schemas": {skill: ACCEPT_ANY_OBJECT},
    }
    answer = client.post(f"{url}/v1/agents", json=body, headers=OPERATOR)
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    root = tmp_path_factory.mktemp("chain-federation")
    with served(root) as coordinator, httpx.Client(timeout=90) as client:
        trust = f"{DEFAULT_ISSUER}={coordinator.url}/.well-known/jwks.json"
        exchange = f"{coordinator.url}/token-exchange"
        with (
            member(TERMS_EXAMPLE, root / "terms", "--trust-issuer", trust) as terms,
            member(
                CHAIN_EXAMPLE,
                root / "privacy",
                *("--trust-issuer", trust, "--exchange-url", exchange, "--terms-agent", TERMS),
            ) as privacy,
        ):
            register(client, coordinator.url, terms.url, TERMS, "check-terms")
            register(client, coordinator.url, privacy.url, PRIVACY, REVIEW_SKILL)
            yield Federation(coordinator.url, terms, privacy, client)


def test_a_sub_delegates_to_b_with_nested_budgets_in_every_view(federation: Federation) -> None:
    document = federation.delegate()
    assert document["local_state"] == "ACCEPTED", document
    assert len(document["artifacts"]) == 1
    content = federation.client.get(
        f"{federation.url}/v1/runs/{document['run_id']}/artifacts/1", headers=OPERATOR
    ).text
    # the legal team's findings, come back through the privacy team
    assert '"found":["refund"]' in content.replace(" ", "")
    assert '"missing":["warranty"]' in content.replace(" ", "")
    legal_receipt = receipt_in(content)

    run_id = document["run_id"]
    shown = federation.get(f"/v1/runs/{run_id}")
    [hop] = shown["chain"]
    [minted] = federation.get(f"/v1/audit/runs/{run_id}")["grants"]
    assert hop["granted"] and hop["to"] == TERMS and hop["depth"] == 2
    assert hop["parent_jti"] == minted["jti"]
    # nested exactly: the child holds half the context units the privacy team held
    reconstruction = federation.get(f"/v1/audit/runs/{run_id}")
    assert reconstruction["hops"] == shown["chain"]
    held = held_budget(federation, run_id)
    assert hop["budget"]["context_units"] == held["context_units"] // 2
    assert hop["budget"]["actions"] <= held["actions"] and hop["budget"]["effects"] == 0
    # the legal team's receipt, passed up in the privacy team's artifact, verifies with the
    # legal team's own key and states the hop: its child token, handoff and final state
    claims = verified_receipt(
        legal_receipt, load_key_set(federation.terms.data_dir / "keys").trusted_keys()
    )
    assert (claims["jti"], claims["handoff_id"]) == (hop["jti"], hop["handoff_id"])
    assert claims["iss"] == hop["aud"] and claims["state"] == "TASK_STATE_COMPLETED"
    # `run show` and `audit show` print the hop
    for text in (render_document(shown), render_reconstruction(reconstruction)):
        section = text.split("delegation chain (token exchanges):\n", 1)[1]
        assert TERMS in section.splitlines()[1] and hop["jti"] in section

    # one trace across the three services: the run's, in each member's logs
    trace_id = reconstruction["trace_id"]
    assert trace_id in federation.privacy.log.read_text()
    assert trace_id in federation.terms.log.read_text()

    bundle = federation.client.post(
        f"{federation.url}/v1/audit/runs/{run_id}/prove", headers=OPERATOR
    ).json()
    assert "delegation.exchanged" in str(bundle)
    verdict = federation.client.post(
        f"{federation.url}/v1/audit/verify", json={"bundle": bundle}, headers=OPERATOR
    ).json()
    assert verdict["ok"], verdict
    # one bundle, every hop: the reader checks it with each party's own key, the legal
    # team's included, and without that key the hop's receipt proves nothing
    [listed] = bundle["hop_receipts"]
    assert compact(listed["receipt"]) == legal_receipt
    parties = [
        load_key_set(member.data_dir / "keys").public_jwks()
        for member in (federation.privacy, federation.terms)
    ]
    coordinator = [federation.client.get(f"{federation.url}/.well-known/jwks.json").json()]
    assert verify_proof_bundle(bundle, Anchors.of(coordinator, parties)).ok
    without = verify_proof_bundle(bundle, Anchors.of(coordinator, parties[:1]))
    assert (without.kind, without.seq) == ("untrusted_key", listed["seq"]), without


def receipt_in(content: str) -> str:
    """The legal team's receipt in the privacy team's artifact (as the coordinator kept
    it): the kit carries it in the artifact's metadata, the receipts extension's hops."""
    found = re.search(r'"hops"\s*:\s*\[\s*"([A-Za-z0-9_.-]+)"\s*\]', content)
    assert found is not None, content
    return found.group(1)


def held_budget(federation: Federation, run_id: str) -> dict[str, int]:
    """The budget the privacy team's token held (the handoff's envelope as admitted)."""
    for branch in federation.get(f"/v1/audit/runs/{run_id}")["branches"]:
        if branch["target"] == PRIVACY:
            break
    events = federation.get(f"/v1/audit/runs/{run_id}/export")["events"]
    for event in events:
        admission = admission_in(event["event_type"], event["data"])
        if admission is not None:
            budget: dict[str, int] = admission["contract"]["budget"]
            return budget
    raise AssertionError("no admitted handoff")


def test_an_agent_down_in_the_middle_fails_its_parents_handoff_naming_the_cause(
    federation: Federation,
) -> None:
    federation.terms.stop()
    document = federation.delegate()
    assert document["local_state"] != "ACCEPTED"
    assert document["reason"] == "remote_failed:agent_unreachable", document
    [hop] = federation.get(f"/v1/runs/{document['run_id']}")["chain"]
    assert hop["granted"] and hop["to"] == TERMS  # granted, then the agent was not there
