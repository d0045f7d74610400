"""A member told by a signed push that its issuer revoked a grant, on loopback.

A genuine push (the coordinator's key, this member's audience, fresh) cancels the task
running under the revoked handoff and every later call with a token of that handoff is
refused ``token_revoked``, on every binding (they all call the one verifier); another
handoff is untouched. A push that is forged (another key), replayed (same jti), meant
for another member, stale or malformed is refused with its stable reason and revokes
nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contracts import strict_json
from coordinator.authority.revocation import push_token
from coordinator.authority.tokens import sign_jws
from tests.remote_risk.delegated import ISSUER, Caller, delegated_service, refusal_reason
from tests.tokens import ATTACKER_KEY, COORDINATOR_KEY, forge, header

REVOCATIONS = "/revocations"


@pytest.fixture
def member() -> Iterator[tuple[Caller, Any]]:
    # a long skill, so the task is still running when the push arrives; no poll meanwhile
    with delegated_service(skill_delay_seconds=30.0, revocation_poll_seconds=3600.0) as served:
        yield served


def working_task(caller: Caller, handoff_id: str) -> str:
    sent = caller.send("run-1", handoff_id, configuration={"returnImmediately": True})
    return str(caller.task_of(sent)["id"])


def task_state(caller: Caller, task_id: str, handoff_id: str) -> str:
    answer = caller.get_task(task_id, handoff_id)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["result"]["status"]["state"])


def push(caller: Caller, token: str) -> httpx.Response:
    return httpx.post(caller.base_url + REVOCATIONS, content=token, timeout=10)


def genuine(caller: Caller, handoffs: list[str], now: int | None = None) -> str:
    now = int(time.time()) if now is None else now
    return push_token(COORDINATOR_KEY, ISSUER, caller.audience, "run-1", handoffs, now)


def test_a_push_cancels_the_task_and_refuses_the_revoked_grant(
    member: tuple[Caller, Any],
) -> None:
    caller, _ = member
    task_id = working_task(caller, "handoff-revoked")
    other = working_task(caller, "handoff-kept")
    answer = push(caller, genuine(caller, ["handoff-revoked"]))
    assert answer.status_code == 200, answer.text
    assert answer.json()["cancelled"] == [task_id]
    # every later call under the revoked grant is refused, a fresh token of it too
    status, reason = refusal_reason(caller.get_task(task_id, "handoff-revoked"))
    assert (status, reason) == (401, "token_revoked")
    status, reason = refusal_reason(caller.send("run-1", "handoff-revoked", attempt=2))
    assert (status, reason) == (401, "token_revoked")
    # the same holds on the HTTP+JSON binding
    rest = httpx.get(
        f"{caller.base_url}/a2a/rest/tasks/{task_id}",
        headers={
            "A2A-Version": "1.0",
            "Authorization": "Bearer " + caller.token("handoff-revoked"),
        },
        timeout=10,
    )
    assert rest.status_code == 401 and "token_revoked" in rest.text
    # the task ended CANCELED (seen under the other handoff's principal it does not exist,
    # so the member's own store says it)
    _, app = member
    assert app.state.task_store.get(_owner(caller, "handoff-revoked"), task_id).state.value == (
        "TASK_STATE_CANCELED"
    )
    # the other handoff works on
    assert task_state(caller, other, "handoff-kept") == "TASK_STATE_WORKING"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("forged", (401, "revocation_signature_invalid")),
        ("other_audience", (401, "revocation_audience_mismatch")),
        ("stale", (401, "revocation_stale")),
        ("future", (401, "revocation_stale")),
        ("delegation_type", (400, "revocation_malformed")),
        ("no_handoffs", (400, "revocation_malformed")),
        ("not_a_jws", (400, "revocation_malformed")),
    ],
)
def test_a_bad_push_is_refused_and_revokes_nothing(
    member: tuple[Caller, Any], case: str, expected: tuple[int, str]
) -> None:
    caller, _ = member
    task_id = working_task(caller, "handoff-1")
    answer = push(caller, bad_push(caller, case))
    assert (answer.status_code, answer.json()["reason"]) == expected
    assert task_state(caller, task_id, "handoff-1") == "TASK_STATE_WORKING"


def bad_push(caller: Caller, case: str) -> str:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": caller.audience,
        "iat": now,
        "exp": now + 120,
        "jti": f"rev-{case}",
        "run": "run-1",
        "handoffs": ["handoff-1"],
    }
    if case == "forged":  # the attacker's key, claiming the coordinator key's kid
        head = header(typ="revocation+jwt")
        return forge(head, claims, key=ATTACKER_KEY.private_key)
    changes: dict[str, Any] = {
        "other_audience": {"aud": "urn:ietf:params:oauth:jwk-thumbprint:sha-256:someone-else"},
        "stale": {"iat": now - 600, "exp": now - 480},
        "future": {"iat": now + 600, "exp": now + 720},
        "no_handoffs": {"handoffs": []},
    }
    if case == "delegation_type":
        return sign_jws(claims, COORDINATOR_KEY, "delegation+jwt")
    if case == "not_a_jws":
        return "not a token"
    return sign_jws(claims | changes[case], COORDINATOR_KEY, "revocation+jwt")


def test_a_replayed_push_is_refused(member: tuple[Caller, Any]) -> None:
    caller, _ = member
    token = genuine(caller, ["handoff-gone"])
    assert push(caller, token).status_code == 200
    answer = push(caller, token)
    assert (answer.status_code, answer.json()["reason"]) == (409, "revocation_replayed")


def _owner(caller: Caller, handoff_id: str) -> str:
    return strict_json.dumps([ISSUER, caller.sub, "tenant-a", handoff_id]).decode()
