"""A member SIGKILLed mid-incident and started again still knows what it was told.

One real ``python -m remote_risk`` process on its own database. Before the kill it is
pushed a revocation of one handoff, runs a task under another handoff's grant, and
answers a request carrying a holder proof. Killed (nothing in memory survives) and
started again on the same database, it still refuses a token of the revoked handoff
(``token_revoked``, without waiting for any poll) and the replayed push
(``revocation_replayed``), still knows the grant it watched, so a push revoking that
grant cancels the task the restart resumed, and refuses the replayed holder proof
(``holder_proof_replayed``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agent_cards import dpop
from agent_cards.identity import identity_of
from agent_cards.jwk import thumbprint_of
from agent_cards.keys import KeySet, SigningKey
from coordinator.authority.revocation import push_token
from member_kit.server.app import JSONRPC_PATH
from tests import tokens
from tests.processes import RemoteRiskProcess
from tests.remote_risk.delegated import ISSUER, Caller, refusal_reason
from tests.tokens import COORDINATOR_KEY, header

REVOKED, WATCHED, HELD = "handoff-revoked", "handoff-watched", "handoff-held"
HOLDER = SigningKey.generate("EdDSA")


@dataclass
class Restarted:
    """The member after its restart, and what was sent to it before the kill."""

    caller: Caller
    pushed: str  # the push that revoked REVOKED
    watched_task: str  # a task running under WATCHED's grant at the kill
    held: tuple[str, str, str]  # a GetTask under HELD: task id, token, proof


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restarted]:
    root = tmp_path_factory.mktemp("revocation-restart")
    jwks = root / "coordinator-jwks.json"
    jwks.write_text(json.dumps(KeySet(active=COORDINATOR_KEY).public_jwks()))
    # a slow skill, so tasks are still running; no status-list poll in between
    slow = ("--skill-delay-seconds", "60", "--revocation-poll-seconds", "3600")
    member = RemoteRiskProcess(root / "member", jwks, *slow)
    member.start()
    try:
        caller = Caller(member.base_url, identity_of(member.keys.active.verification_key()))
        before = told_before_the_kill(caller)
        member.kill()
        member.start()
        yield Restarted(caller, *before)
    finally:
        member.stop()


def told_before_the_kill(caller: Caller) -> tuple[str, str, tuple[str, str, str]]:
    working(caller, REVOKED)
    pushed = push_token(COORDINATOR_KEY, ISSUER, caller.audience, "run-1", [REVOKED], now())
    answer = push(caller, pushed)
    assert answer.status_code == 200 and answer.json()["revoked"] == 1, answer.text
    watched_task = working(caller, WATCHED)
    held_task = working(caller, HELD, bound_token(caller, HELD))
    token = bound_token(caller, HELD)
    proof = dpop.proof(HOLDER, "POST", caller.base_url + JSONRPC_PATH, token)
    assert get_task(caller, held_task, token, proof).status_code == 200
    return pushed, watched_task, (held_task, token, proof)


def test_a_revoked_handoff_stays_revoked(restarted: Restarted) -> None:
    caller = restarted.caller
    answer = caller.send("run-1", REVOKED, attempt=2)  # a fresh token of the revoked grant
    assert refusal_reason(answer) == (401, "token_revoked")


def test_a_push_taken_before_the_kill_is_refused_as_replayed(restarted: Restarted) -> None:
    answer = push(restarted.caller, restarted.pushed)
    assert (answer.status_code, answer.json()["reason"]) == (409, "revocation_replayed")


def test_a_grant_watched_before_the_kill_has_its_task_cancelled(restarted: Restarted) -> None:
    caller = restarted.caller
    revoking = push_token(COORDINATOR_KEY, ISSUER, caller.audience, "run-1", [WATCHED], now())
    answer = push(caller, revoking)
    assert answer.status_code == 200, answer.text
    assert answer.json()["cancelled"] == [restarted.watched_task]


def test_a_holder_proof_seen_before_the_kill_is_refused(restarted: Restarted) -> None:
    task_id, token, proof = restarted.held
    answer = get_task(restarted.caller, task_id, token, proof)
    assert refusal_reason(answer) == (401, "holder_proof_replayed")
    # the holder's next proof is fine: only the replay is refused
    fresh = dpop.proof(HOLDER, "POST", restarted.caller.base_url + JSONRPC_PATH, token)
    assert get_task(restarted.caller, task_id, token, fresh).status_code == 200


def working(caller: Caller, handoff_id: str, token: str | None = None) -> str:
    proof = None if token is None else post_proof(caller, token)
    sent = send(caller, handoff_id, token, proof)
    return str(caller.task_of(sent)["id"])


def send(caller: Caller, handoff_id: str, token: str | None, proof: str | None) -> httpx.Response:
    if proof is None:
        return caller.send("run-1", handoff_id, configuration={"returnImmediately": True})
    assert token is not None
    message = {
        "messageId": f"m-{handoff_id}",
        "role": "ROLE_USER",
        "parts": [{"data": caller.member.valid_input(), "mediaType": "application/json"}],
        "metadata": {
            "handoffId": handoff_id,
            "attempt": 1,
            "skillId": caller.member.skill,
            "idempotencyKey": f"run-1:{handoff_id}",
        },
    }
    params = {"message": message, "configuration": {"returnImmediately": True}}
    return call(caller, "SendMessage", params, token, proof)


def get_task(caller: Caller, task_id: str, token: str, proof: str) -> httpx.Response:
    return call(caller, "GetTask", {"id": task_id}, token, proof)


def call(
    caller: Caller, method: str, params: dict[str, Any], token: str, proof: str
) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}", "DPoP": proof}
    return httpx.post(caller.base_url + JSONRPC_PATH, json=body, headers=headers, timeout=10)


def post_proof(caller: Caller, token: str) -> str:
    return dpop.proof(HOLDER, "POST", caller.base_url + JSONRPC_PATH, token)


def bound_token(caller: Caller, handoff_id: str) -> str:
    """A token of ``handoff_id`` bound to :data:`HOLDER`'s key (``cnf.jkt``)."""
    claims = tokens.delegation_claims(
        now=now(),
        issuer=ISSUER,
        audience=caller.audience,
        scope=caller.member.scope,
        handoff_id=handoff_id,
        jti=f"jti-bound-{time.monotonic_ns()}",
    )
    claims["cnf"] = {"jkt": thumbprint_of(HOLDER.verification_key().public_key)}
    return tokens.forge(header(), claims)


def push(caller: Caller, token: str) -> httpx.Response:
    return httpx.post(caller.base_url + "/revocations", content=token, timeout=10)


def now() -> int:
    return int(time.time())
