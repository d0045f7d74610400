"""Our coordinator and the real remote_risk on each of its three bindings.

remote_risk (its own process, serving JSON-RPC, HTTP+JSON and gRPC) is registered with
``federation register``: its card names JSON-RPC first, so JSON-RPC is chosen, and the
extended card it declares is fetched with a delegation token and verified. The stored
choice is then switched to each interface the card offers, as a card preferring that
binding would have made it, and ``federation delegate`` hands a policy to it: ACCEPTED
with the Finding admitted on every binding (one token audience, the service's id, on
all of them), and a task that stops for input is cancelled on every binding.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_cards.keys import TrustedKeys
from coordinator.audit.receipts import grant_recorded
from coordinator.authority.holder import HOLDER_PROOF_ENV
from coordinator.authority.identity import coordinator_keys, issuer_id
from coordinator.dispatch.attempt.card_caller import card_caller
from coordinator.errors import RemoteA2AError
from coordinator.remote.cards.card_verification import verified_kid
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.bindings import transport_for
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.processes import RemoteRiskProcess
from tests.remote_risk.test_resume import PAYLOAD
from tests.servers import free_port

SKILL = "interpret-risk-policy"


def _federation(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FEDERATION_DATA_DIR": str(data)}
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("risk-bindings")
    data = DataDir(root / "coordinator")
    coordinator_keys(data)
    grpc_port = free_port()
    remote = RemoteRiskProcess(
        root / "remote", data.path("jwks.json"), "--grpc-port", str(grpc_port)
    )
    remote.start()
    try:
        key_file = root / "risk-keys.json"
        key_file.write_text(json.dumps(remote.keys.public_jwks()))
        done = _federation(
            data.root, "register", remote.base_url, "--skill", SKILL,
            "--trust-key", str(key_file), "--return-finding", SKILL,
            "--allow-origin", f"127.0.0.1:{grpc_port}",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        yield data.root
    finally:
        remote.stop()


def _use(data: Path, binding: str) -> dict[str, Any]:
    """Switch the stored choice to the card's interface of ``binding``."""
    path = data / "agents.json"
    agents = json.loads(path.read_text())
    agent = agents["remote-risk"]
    offered = {i["protocolBinding"]: i for i in agent["card"]["supportedInterfaces"]}
    agent.update(binding=binding, endpoint=offered[binding]["url"])
    path.write_text(json.dumps(agents))
    return dict(agent)


def _delegate(data: Path, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    path = data / "input.json"
    path.write_text(json.dumps(payload))
    done = _federation(
        data, "delegate", "--to", "remote-risk", "--skill", SKILL, "--input", str(path), "--json"
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_registration_chose_jsonrpc_and_verified_the_extended_card(registered: Path) -> None:
    agent = json.loads((registered / "agents.json").read_text())["remote-risk"]
    assert agent["binding"] == "JSONRPC"
    bindings = [i["protocolBinding"] for i in agent["card"]["supportedInterfaces"]]
    assert bindings == ["JSONRPC", "HTTP+JSON", "GRPC"]
    assert agent["extended_card"]["capabilities"]["extendedAgentCard"] is True


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
def test_a_delegation_to_remote_risk_is_accepted_on_each_binding(
    registered: Path, binding: str
) -> None:
    _use(registered, binding)
    code, document = _delegate(registered, PAYLOAD)
    assert code == 0, (document["reason"], document["notes"])
    assert (document["local_state"], document["reason"]) == ("ACCEPTED", "finding_admitted")
    assert document["branches"][0]["interface"]["binding"] == binding


@pytest.mark.parametrize("binding", ["HTTP+JSON", "GRPC"])
def test_a_question_from_remote_risk_is_cancelled_on_each_binding(
    registered: Path, binding: str
) -> None:
    """An empty input makes remote_risk stop for input; the coordinator cancels the task."""
    _use(registered, binding)
    code, document = _delegate(registered, {})
    assert code == 4
    assert document["local_state"] == "CANCELLED"
    assert document["remote_state"] == "TASK_STATE_CANCELED"
    assert document["remote_question"] is not None


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
def test_the_extended_card_verifies_on_each_binding(registered: Path, binding: str) -> None:
    """GetExtendedAgentCard on each binding, with the token registration would send: the
    card verifies with the key pinned for the public card; without a token it is refused."""
    agent = RegisteredAgent.model_validate(_use(registered, binding))
    data = DataDir(registered)
    caller = card_caller(coordinator_keys(data), issuer_id())

    async def fetch(headers: dict[str, str]) -> dict[str, Any]:
        async with A2AClient() as client:
            remote = transport_for(client, agent.interface, agent.destinations)
            return await remote.extended_card(headers)

    document = asyncio.run(fetch(caller(agent)))
    trusted = TrustedKeys.from_json(agent.pinned_jwks)
    assert verified_kid(document, trusted, "extended card") == agent.verified_kid
    with pytest.raises(RemoteA2AError):
        asyncio.run(fetch({}))


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
def test_a_holder_bound_delegation_is_accepted_on_each_binding(
    registered: Path, binding: str
) -> None:
    """With ``FEDERATION_HOLDER_PROOF=1`` every token names the coordinator's key and every
    request carries its fresh proof: remote_risk accepts the run on each binding."""
    _use(registered, binding)
    path = registered / "input.json"
    path.write_text(json.dumps(PAYLOAD))
    env = {**os.environ, "FEDERATION_DATA_DIR": str(registered), HOLDER_PROOF_ENV: "1"}
    args = ["delegate", "--to", "remote-risk", "--skill", SKILL, "--input", str(path), "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    document = json.loads(done.stdout)
    assert done.returncode == 0, (document["reason"], document["notes"])
    assert (document["local_state"], document["reason"]) == ("ACCEPTED", "finding_admitted")
    ws = Workspace(DataDir(registered))
    try:
        events = ws.ledger().events(document["run_id"])
    finally:
        ws.close()
    minted = [grant_recorded(e.event_type, e.data) for e in events]
    grants = [grant for grant in minted if grant is not None]
    kid = coordinator_keys(DataDir(registered)).signing_key().kid
    assert grants and all(grant.get("cnf_jkt") == kid for grant in grants)
