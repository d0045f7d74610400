"""A registered-but-hostile agent, holding its own key, lies in the card it signs.

Real processes on loopback: remote_risk (``python -m remote_risk``, registered with the
coordinator, trusting its keys), a rogue agent (``python -m tests.rogue_card_agent``) whose
card names remote_risk's JSON-RPC URL as its own JSON-RPC interface, and the
coordinator's CLI. What must hold:

* registration refuses a card that points at another registered agent's address
  (``interface_of_other_agent``) or off its own origin without the operator's allowance
  (``interface_off_origin``), before any token is sent to it;
* a token the coordinator mints for the rogue (its audience: the rogue's key, not a URL
  its card names) is refused by remote_risk (``audience_mismatch``) on JSON-RPC,
  HTTP+JSON and gRPC;
* a token of one run cannot get, list or cancel another run's task, nor one of another
  handoff of its run;
* no byte leaves for a host that is neither the card's origin nor allowed.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2, status_pb2

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from agent_cards.keys import SigningKey, TrustedKeys
from contracts.handoff import HandoffBudget, HandoffRecord
from contracts.wire import PROTOCOL_VERSION, AgentInterface, to_wire
from coordinator.authority.delegator import Delegator, RunAuthority
from coordinator.authority.identity import coordinator_keys, issuer_id
from coordinator.remote.cards.registry import Registry
from coordinator.storage.datadir import DataDir
from remote_risk.service import risk_card
from tests.processes import PAYLOAD, RemoteRiskProcess, registered
from tests.remote_risk.conftest import risk_input
from tests.servers import free_port

SKILL = "interpret-risk-policy"
SCOPES = frozenset({"risk:interpret"})
ROGUE = "rogue"


@dataclass
class Remote:
    data: DataDir
    process: RemoteRiskProcess
    grpc_address: str

    @property
    def jsonrpc_url(self) -> str:
        return self.process.base_url + "/a2a/jsonrpc"


@dataclass
class Rogue:
    base_url: str
    jwk_file: Path
    tokens_file: Path

    def tokens(self) -> list[str]:
        lines = self.tokens_file.read_text().splitlines()
        return [line.removeprefix("Bearer ") for line in lines if line]


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    root = tmp_path_factory.mktemp("counterparty")
    port = free_port()
    with registered(root, "--grpc-port", str(port)) as (data, process):
        yield Remote(data, process, f"127.0.0.1:{port}")


@contextmanager
def rogue_agent(root: Path, victim: str) -> Iterator[Rogue]:
    """The rogue as its own process, with its own key, its card naming ``victim``."""
    port = free_port()
    rogue = Rogue(f"http://127.0.0.1:{port}", root / "rogue.jwk", root / "rogue-tokens.txt")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.rogue_card_agent", "--port", str(port), "--victim", victim,
         "--jwk-out", str(rogue.jwk_file), "--tokens-out", str(rogue.tokens_file)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == f"rogue listening on {rogue.base_url}"
        yield rogue
    finally:
        process.terminate()
        process.wait(timeout=10)


def federation(data: DataDir, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FEDERATION_DATA_DIR": str(data.root)}
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True, text=True, timeout=90, env=env,
    )  # fmt: skip


def refused_with(done: subprocess.CompletedProcess[str], reason: str) -> None:
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"federation: error: {reason}: "), lines[0]


def stored_agents(data: DataDir) -> dict[str, Any]:
    path = data.path("agents.json")
    return json.loads(path.read_text()) if path.exists() else {}


# --- registration ---------------------------------------------------------------------------


def test_a_card_naming_a_registered_agents_url_is_refused_and_sent_no_token(
    remote: Remote, tmp_path: Path
) -> None:
    with rogue_agent(tmp_path, remote.jsonrpc_url) as rogue:
        done = federation(
            remote.data, "register", rogue.base_url, "--name", ROGUE,
            "--trust-key", str(rogue.jwk_file),
        )  # fmt: skip
        refused_with(done, "interface_of_other_agent")
        # even with the operator allowing remote_risk's origin for it
        allowing = federation(
            remote.data, "register", rogue.base_url, "--name", ROGUE,
            "--trust-key", str(rogue.jwk_file), "--allow-origin", remote.process.base_url,
        )  # fmt: skip
        refused_with(allowing, "interface_of_other_agent")
        assert rogue.tokens() == []
    assert ROGUE not in stored_agents(remote.data)


def test_a_card_off_its_origin_is_refused_unless_the_operator_allows_that_origin(
    tmp_path: Path,
) -> None:
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)
    elsewhere = f"http://127.0.0.1:{free_port()}"
    with rogue_agent(tmp_path, elsewhere + "/a2a/jsonrpc") as rogue:
        trust = ("--trust-key", str(rogue.jwk_file))
        refused_with(federation(data, "register", rogue.base_url, *trust), "interface_off_origin")
        assert rogue.tokens() == []
        done = federation(data, "register", rogue.base_url, *trust, "--allow-origin", elsewhere)
        assert done.returncode == 0, done.stderr
    (agent,) = stored_agents(data).values()
    assert agent["allowed_origins"] == [elsewhere.removeprefix("http://")]


# --- a token minted for the rogue -------------------------------------------------------------


def _rogue_as_stored_before(rogue: Rogue) -> dict[str, Any]:
    """The rogue as agents.json held it when its card was accepted (before origins were
    checked): its card, its key pinned, its own HTTP+JSON interface chosen."""
    card = httpx.get(rogue.base_url + "/.well-known/agent-card.json", timeout=10).json()
    jwk = json.loads(rogue.jwk_file.read_text())
    kid = next(iter(TrustedKeys.from_json(jwk))).kid
    return {
        "name": ROGUE,
        "card_url": rogue.base_url + "/.well-known/agent-card.json",
        "endpoint": rogue.base_url + "/a2a/rest",
        "binding": "HTTP+JSON",
        "protocol_version": "1.0",
        "card": card,
        "registered_at": "2026-01-01T00:00:00Z",
        "trust": "pinned_key",
        "pinned_jwks": {"keys": [jwk]},
        "verified_kid": kid,
    }


@contextmanager
def stored_rogue(data: DataDir, rogue: Rogue) -> Iterator[None]:
    agents = stored_agents(data)
    data.write_json({**agents, ROGUE: _rogue_as_stored_before(rogue)}, "agents.json")
    try:
        yield
    finally:
        data.write_json(agents, "agents.json")


def _captured_token(remote: Remote, rogue: Rogue, tmp_path: Path) -> str:
    """What the rogue receives from one delegation to it: the coordinator's token."""
    payload = tmp_path / "input.json"
    payload.write_text(json.dumps(PAYLOAD))
    federation(remote.data, "delegate", "--to", ROGUE, "--skill", SKILL, "--input", str(payload))
    tokens = rogue.tokens()
    assert tokens, "the coordinator sent the rogue nothing"
    return tokens[0]


def _jsonrpc(remote: Remote, method: str, params: dict[str, Any], token: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    return httpx.post(remote.jsonrpc_url, json=body, headers=headers, timeout=10)


def _jsonrpc_reason(response: httpx.Response) -> str:
    error = response.json().get("error")
    assert error is not None, response.text
    return str(error["data"][0]["metadata"]["reason"])


def _grpc_reason(remote: Remote, token: str) -> str:
    async def call() -> Any:
        async with grpc.aio.insecure_channel(remote.grpc_address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            metadata = [("a2a-version", "1.0"), ("authorization", f"Bearer {token}")]
            return await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=metadata, timeout=10)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        asyncio.run(call())
    trailers = dict(raised.value.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return str(info.metadata.get("reason", info.reason))


def _send_params(handoff_id: str, key: str) -> dict[str, Any]:
    message = {
        "messageId": f"m-{uuid.uuid4().hex}",
        "role": "ROLE_USER",
        "parts": [{"data": risk_input(), "mediaType": "application/json"}],
        "metadata": {"handoffId": handoff_id, "attempt": 1, "skillId": SKILL,
                     "idempotencyKey": key},
    }  # fmt: skip
    return {"message": message}


def _handoff_of(token: str) -> str:
    from agent_cards.keys import b64url_decode

    claims = json.loads(b64url_decode(token.split(".")[1]))
    return str(claims["handoff"]["id"])


def test_a_token_minted_for_the_rogue_is_refused_by_remote_risk_on_every_binding(
    remote: Remote, tmp_path: Path
) -> None:
    with rogue_agent(tmp_path, remote.jsonrpc_url) as rogue, stored_rogue(remote.data, rogue):
        token = _captured_token(remote, rogue, tmp_path)
    handoff = _handoff_of(token)
    # the rogue replays it at remote_risk: to read every task, and to open one of its own
    listed = _jsonrpc(remote, "ListTasks", {}, token)
    assert _jsonrpc_reason(listed) == "audience_mismatch"
    sent = _jsonrpc(remote, "SendMessage", _send_params(handoff, "rogue:1"), token)
    assert _jsonrpc_reason(sent) == "audience_mismatch"
    rest = httpx.get(
        remote.process.base_url + "/a2a/rest/tasks",
        headers={"A2A-Version": "1.0", "Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert rest.status_code in (401, 403), rest.text
    assert rest.json()["error"]["details"][0]["metadata"]["reason"] == "audience_mismatch"
    assert _grpc_reason(remote, token) == "audience_mismatch"


# --- one run's token, another run's task ------------------------------------------------------


def _token(data: DataDir, audience: str, handoff_id: str, principal: str | None = None) -> str:
    """The token a run of the coordinator mints for one handoff (no principal given: the
    run's own)."""
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    authority = RunAuthority(scopes=SCOPES, **({"principal": principal} if principal else {}))
    delegator = Delegator(coordinator_keys(data), authority, issuer_id(), run_id)
    budget = HandoffBudget(actions=1, context_units=4000, effects=0, model_requests=1)
    record = HandoffRecord(
        handoff_id=handoff_id, run_id=run_id, source="coordinator", target="remote-risk",
        skill=SKILL, final_owner="coordinator", budget=budget,
        lease_expires_at=datetime.now(UTC) + timedelta(seconds=60),
        duplicate_key=f"{run_id}:{handoff_id}",
    )  # fmt: skip
    return delegator.mint(record, audience, SCOPES, remaining=delegator.root.handoff.budget).token


def _task_of(response: httpx.Response) -> dict[str, Any]:
    assert "error" not in response.json(), response.text
    return dict(response.json()["result"]["task"])


def _not_found(response: httpx.Response) -> bool:
    error = response.json().get("error")
    return error is not None and error["code"] == -32001


@pytest.mark.parametrize("principal", [None, "alice"], ids=["run-principals", "one-principal"])
def test_a_token_of_one_run_cannot_reach_another_runs_task(
    remote: Remote, principal: str | None
) -> None:
    audience = Registry(remote.data).get("remote-risk").agent_id
    handoff_a, handoff_b = f"h-a-{uuid.uuid4().hex[:6]}", f"h-b-{uuid.uuid4().hex[:6]}"
    token_a = _token(remote.data, audience, handoff_a, principal)
    token_b = _token(remote.data, audience, handoff_b, principal)
    task = _task_of(_jsonrpc(remote, "SendMessage", _send_params(handoff_b, handoff_b), token_b))
    assert _jsonrpc(remote, "GetTask", {"id": task["id"]}, token_b).json()["result"]["id"]
    assert _not_found(_jsonrpc(remote, "GetTask", {"id": task["id"]}, token_a))
    listed = _jsonrpc(remote, "ListTasks", {}, token_a).json()["result"]
    assert task["id"] not in [t["id"] for t in listed.get("tasks", [])]
    assert _not_found(_jsonrpc(remote, "CancelTask", {"id": task["id"]}, token_a))


# --- no byte to a host the rule does not allow -----------------------------------------------


class Listener:
    """A loopback port that counts the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        time.sleep(0.3)
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def test_no_byte_leaves_for_a_host_neither_the_cards_origin_nor_allowed(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)
    listener = Listener()
    card_origin = f"http://127.0.0.1:{free_port()}"
    elsewhere = f"http://127.0.0.1:{listener.port}"
    key = SigningKey.generate()
    try:
        data.write_json(
            {
                "far": {
                    "name": "far",
                    "card_url": card_origin + "/.well-known/agent-card.json",
                    "endpoint": elsewhere + "/a2a/rest",
                    "binding": "HTTP+JSON",
                    "card": _card_pointing_at(card_origin, elsewhere + "/a2a/rest"),
                    "registered_at": "2026-01-01T00:00:00Z",
                    "pinned_jwks": {"keys": [key.public_jwk()]},
                    "verified_kid": key.kid,
                }
            },
            "agents.json",
        )
        payload = tmp_path / "input.json"
        payload.write_text(json.dumps(PAYLOAD))
        done = federation(
            data, "delegate", "--to", "far", "--skill", SKILL, "--input", str(payload), "--json"
        )
        document = json.loads(done.stdout)
        assert document["reason"] == "dispatch_failed:destination_not_allowed", (
            document["reason"],
            document.get("notes"),
            document.get("refusals"),
        )
    finally:
        listener.close()
    assert listener.accepted == 0


def _card_pointing_at(card_origin: str, endpoint: str) -> dict[str, Any]:
    """remote_risk's card as served from ``card_origin``, its one interface elsewhere."""
    interface = AgentInterface(
        url=endpoint, protocol_binding="HTTP+JSON", protocol_version=PROTOCOL_VERSION
    )
    card = risk_card(card_origin).model_copy(update={"supported_interfaces": [interface]})
    return to_wire(card)
