"""An unmodified a2a-sdk 1.3 agent joins the federation behind ``federation serve guard``.

Real processes: the stock SDK agent (tests/interop/quickstart_agent.py: no token, no
handoff, no receipt), the guard in front of it as its own process started by the
coordinator's CLI, and the coordinator's CLI for every operator step. The guard is
registered with its key pinned (``--expect-kid``) and a return schema matching what the
agent answers; a delegation is ACCEPTED with a receipt by the guard's key; ``audit
reconcile`` agrees with the guard's decision log; a proof bundle verifies with the
guard's key. A forged token is refused with the kit's reason, and the agent never sees
the request.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey, load_key_set
from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.authority.revocation import push_token
from coordinator.storage.datadir import DataDir
from tests import tokens
from tests.interop.membership import joins_and_is_audited

ROOT = Path(__file__).resolve().parents[2]
AUDIT_TOKEN = secrets.token_urlsafe(32)
SCOPE = "text:summarize"
ANSWER_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["words", "first"],
    "additionalProperties": False,
    "properties": {"words": {"type": "integer", "minimum": 0}, "first": {"type": "string"}},
}
UPSTREAM_CALLS = "POST /a2a/jsonrpc"


@dataclass
class Federation:
    data: DataDir
    guard_url: str
    guard_dir: Path
    agent_log: Path
    guard: subprocess.Popen[str]
    start_guard: Callable[[], subprocess.Popen[str]]

    def upstream_calls(self) -> int:
        """How many JSON-RPC requests the agent received (uvicorn's access log)."""
        return self.agent_log.read_text().count(UPSTREAM_CALLS)

    def restart_guard(self) -> None:
        """Stop the guard and start it again on the same data directory."""
        _stop(self.guard)
        self.guard = self.start_guard()
        self.guard_url = _first_line(self.guard, "guard listening on ")


def _start(args: list[str], out: IO[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=out, text=True, env=env, cwd=ROOT)


def _first_line(process: subprocess.Popen[str], expected: str) -> str:
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    assert first.startswith(expected), first
    return first.rpartition(" ")[2]


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Federation]:
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)
    agent_log = tmp_path / "agent.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with agent_log.open("w") as log:
        agent = _start([sys.executable, "-m", "tests.interop.quickstart_agent"], log, env)
    try:
        agent_url = _first_line(agent, "agent listening on ")
        guard_dir = tmp_path / "guard"
        guard_args = [
            sys.executable, "-m", "coordinator", "serve", "guard", "--upstream", agent_url,
            "--skill-scope", f"summarize={SCOPE}", "--data-dir", str(guard_dir),
            "--trust-issuer", f"{DEFAULT_ISSUER}={data.path('jwks.json')}",
        ]  # fmt: skip
        guard_env = {**env, "FEDERATION_DATA_DIR": str(data.root), "GUARD_AUDIT_TOKEN": AUDIT_TOKEN}

        def start_guard() -> subprocess.Popen[str]:
            with (tmp_path / "guard.log").open("a") as log:
                return _start(guard_args, log, guard_env)

        guard = start_guard()
        federation = Federation(data, "", guard_dir, agent_log, guard, start_guard)
        try:
            federation.guard_url = _first_line(guard, "guard listening on ")
            yield federation
        finally:
            _stop(federation.guard)
    finally:
        _stop(agent)


def test_an_unmodified_agent_behind_the_guard_joins_and_is_audited(
    guarded: Federation, tmp_path: Path
) -> None:
    skill = ("summarize", ANSWER_SCHEMA, {"text": "the quick brown fox"})
    keys = guarded.guard_dir / "keys"
    joins_and_is_audited(guarded.data, guarded.guard_url, keys, skill, AUDIT_TOKEN, tmp_path)
    assert guarded.upstream_calls() >= 1  # the access log the other tests count on


def test_a_forged_token_is_refused_before_the_agent_is_asked(guarded: Federation) -> None:
    """A token for the guard, in the coordinator's name and with its kid, signed by
    another key: refused with the kit's reason; the agent receives nothing."""
    guard_key = load_key_set(guarded.guard_dir / "keys").active
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=DEFAULT_ISSUER,
        audience=identity_of(guard_key.verification_key()),
        scope=SCOPE,
    )
    header = tokens.header(coordinator_keys(guarded.data).active)
    forged = tokens.forge(header, claims, key=SigningKey.generate().private_key)
    answer = httpx.post(
        f"{guarded.guard_url}/a2a/jsonrpc",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": _send("handoff-7")},
        headers={"Authorization": f"Bearer {forged}", "A2A-Version": "1.0"},
        timeout=30,
    )
    assert answer.status_code == 401
    assert _reason(answer.json()) == "signature_invalid", answer.json()
    assert guarded.upstream_calls() == 0


def _token(federation: Federation, handoff_id: str, jti: str) -> str:
    """A valid delegation token of the coordinator for the guard, bound to ``handoff_id``."""
    guard_key = load_key_set(federation.guard_dir / "keys").active
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=DEFAULT_ISSUER,
        audience=identity_of(guard_key.verification_key()),
        scope=SCOPE,
        handoff_id=handoff_id,
        jti=jti,
    )
    key = coordinator_keys(federation.data).active
    return tokens.forge(tokens.header(key), claims, key=key.private_key)


def _call(federation: Federation, token: str, method: str, params: dict[str, Any]) -> Any:
    answer = httpx.post(
        f"{federation.guard_url}/a2a/jsonrpc",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
        timeout=30,
    )
    return answer.json()


def _send(handoff_id: str) -> dict[str, Any]:
    return {
        "message": {
            "messageId": f"m-{handoff_id}",
            "role": "ROLE_USER",
            "parts": [{"data": {"text": "one two"}}],
            "metadata": {"skillId": "summarize", "handoffId": handoff_id, "attempt": 1},
        }
    }


def _reason(answer: Any) -> str:
    (info,) = answer["error"]["data"]
    return str(info["metadata"]["reason"])


def test_a_token_sees_only_the_tasks_of_its_handoff_and_opens_one(guarded: Federation) -> None:
    """The guard keeps whose each upstream task is: another handoff's token gets
    TaskNotFound for it, and the agent is not asked; a token opens at most one task; a
    send asking for push notifications (the agent would call the webhook itself) is
    refused before the agent is asked."""
    mine = _token(guarded, "handoff-a", "jti-a")
    opened = _call(guarded, mine, "SendMessage", _send("handoff-a"))["result"]["task"]
    assert opened["metadata"]["handoffId"] == "handoff-a"
    assert opened["metadata"][RECEIPTS_EXTENSION_URI]["jti"] == "jti-a"
    assert "receipt" in opened["metadata"][RECEIPTS_EXTENSION_URI]
    task_id = opened["id"]
    assert _call(guarded, mine, "GetTask", {"id": task_id})["result"]["id"] == task_id
    listed = _call(guarded, mine, "ListTasks", {"includeArtifacts": True})["result"]["tasks"]
    assert [(t["id"], t["metadata"]["handoffId"]) for t in listed] == [(task_id, "handoff-a")]
    assert listed[0]["artifacts"] == opened["artifacts"]
    calls = guarded.upstream_calls()

    theirs = _token(guarded, "handoff-b", "jti-b")
    for method in ("GetTask", "CancelTask"):
        answer = _call(guarded, theirs, method, {"id": task_id})
        assert answer["error"]["code"] == -32001, answer
    assert _call(guarded, theirs, "ListTasks", {})["result"]["tasks"] == []
    assert _reason(_call(guarded, mine, "SendMessage", _send("handoff-a"))) == "replayed_jti"
    push = {
        **_send("handoff-p"),
        "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}},
    }
    answer = _call(guarded, _token(guarded, "handoff-p", "jti-p"), "SendMessage", push)
    assert answer["error"]["code"] == -32003, answer
    assert guarded.upstream_calls() == calls


def test_a_send_retried_under_its_idempotency_key_gets_the_task_it_opened(
    guarded: Federation,
) -> None:
    """As a restarted coordinator resends a handoff (a new token, the same key): the
    guard answers with the task the first send opened and opens none."""
    first = _send("handoff-k")
    first["message"]["metadata"]["idempotencyKey"] = "run-1:handoff-k"
    opened = _call(guarded, _token(guarded, "handoff-k", "jti-k1"), "SendMessage", first)
    retried = _call(guarded, _token(guarded, "handoff-k", "jti-k2"), "SendMessage", first)
    assert retried["result"]["task"]["id"] == opened["result"]["task"]["id"]
    assert retried["result"]["task"]["metadata"][RECEIPTS_EXTENSION_URI]["jti"] == "jti-k1"


def test_a_restarted_guard_still_knows_whose_each_task_is(guarded: Federation) -> None:
    """The guard keeps its record of tasks in its database: after a restart the owner
    reads its task, another handoff's token still finds nothing, and a send retried under
    its idempotency key gets the task it opened without the agent being asked again."""
    first = _send("handoff-r")
    first["message"]["metadata"]["idempotencyKey"] = "run-1:handoff-r"
    mine = _token(guarded, "handoff-r", "jti-r1")
    task_id = _call(guarded, mine, "SendMessage", first)["result"]["task"]["id"]

    guarded.restart_guard()
    assert _call(guarded, mine, "GetTask", {"id": task_id})["result"]["id"] == task_id
    theirs = _token(guarded, "handoff-s", "jti-s")
    assert _call(guarded, theirs, "GetTask", {"id": task_id})["error"]["code"] == -32001
    calls = guarded.upstream_calls()
    retried = _call(guarded, _token(guarded, "handoff-r", "jti-r2"), "SendMessage", first)
    assert retried["result"]["task"]["id"] == task_id
    assert guarded.upstream_calls() == calls + 1  # the task read again, none opened


def test_the_http_json_binding_is_guarded_the_same_way(guarded: Federation) -> None:
    """The card's HTTP+JSON interface reaches the same authorizer and forwarding."""
    rest = f"{guarded.guard_url}/a2a/rest"
    token = _token(guarded, "handoff-r", "jti-r")
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    sent = httpx.post(f"{rest}/message:send", json=_send("handoff-r"), headers=headers, timeout=30)
    assert sent.status_code == 200, sent.text
    task = sent.json()["task"]
    assert task["metadata"]["handoffId"] == "handoff-r"
    assert "receipt" in task["metadata"][RECEIPTS_EXTENSION_URI]
    got = httpx.get(f"{rest}/tasks/{task['id']}", headers=headers, timeout=30)
    assert got.json()["id"] == task["id"]
    calls = guarded.upstream_calls()
    other = {**headers, "Authorization": f"Bearer {_token(guarded, 'handoff-s', 'jti-s')}"}
    assert httpx.get(f"{rest}/tasks/{task['id']}", headers=other, timeout=30).status_code == 404
    assert guarded.upstream_calls() == calls


def test_a_grant_revoked_by_a_signed_push_is_refused_by_the_guard(guarded: Federation) -> None:
    """The guard serves /revocations as every member does: a forged push is refused and
    revokes nothing; the coordinator's push revokes the handoff, whose tokens are then
    refused (token_revoked) before the agent is asked."""
    token = _token(guarded, "handoff-r", "jti-r")
    task_id = _call(guarded, token, "SendMessage", _send("handoff-r"))["result"]["task"]["id"]
    guard_key = load_key_set(guarded.guard_dir / "keys").active
    audience = identity_of(guard_key.verification_key())
    now = int(time.time())
    forged = push_token(tokens.ATTACKER_KEY, DEFAULT_ISSUER, audience, "run-r", ["handoff-r"], now)
    answer = httpx.post(f"{guarded.guard_url}/revocations", content=forged, timeout=30)
    assert (answer.status_code, answer.json()["reason"]) == (401, "revocation_signature_invalid")
    assert _call(guarded, token, "GetTask", {"id": task_id})["result"]["id"] == task_id
    key = coordinator_keys(guarded.data).signing_key()
    genuine = push_token(key, DEFAULT_ISSUER, audience, "run-r", ["handoff-r"], now)
    answer = httpx.post(f"{guarded.guard_url}/revocations", content=genuine, timeout=30)
    assert answer.status_code == 200, answer.text
    calls = guarded.upstream_calls()
    assert _reason(_call(guarded, token, "GetTask", {"id": task_id})) == "token_revoked"
    assert guarded.upstream_calls() == calls
