"""Every invariant of the delegation token profile, checked over real loopback HTTP (issue 13).

* the validity window ``iat <= nbf < exp``: a token that can never be valid is refused
  with ``validity_window_invalid`` (``exp < nbf``, ``exp == iat``, ``nbf < iat``);
* header and payload are UTF-8 without a byte order mark: UTF-16, UTF-32 and a UTF-8 BOM
  are ``token_encoding_invalid``;
* a continuation (``message.taskId``) carries the handoff binding of the task it continues
  (``continuation_mismatch`` otherwise) and its principal (another principal's task is not
  found).

The window and the spelling are checked on every member of ``tests/members.py`` (the
``service`` fixture of test_auth_http); the continuation only on remote_risk, the one
member whose skill leaves a task waiting for input.
"""

from __future__ import annotations

import codecs
import itertools
import json
import time
from typing import Any

import pytest

from agent_cards.keys import b64url_encode
from tests import tokens
from tests.members import RISK
from tests.remote_risk.conftest import binding_of, risk_input
from tests.remote_risk.test_auth_http import Service, refusal, service
from tests.tokens import COORDINATOR_KEY, header

__all__ = ["service"]

_ids = itertools.count(1)
# remote_risk only: a continuation needs a task waiting for input, and the terms member's
# skill answers every acceptable input at once (COMPLETED), never INPUT_REQUIRED.
risk_only = pytest.mark.parametrize("service", [RISK.name], indirect=True)


def _now() -> int:
    return int(time.time())


def raw_token(head: bytes, payload: bytes) -> str:
    """A compact JWS over exactly these header and payload bytes, properly signed."""
    signing_input = f"{b64url_encode(head)}.{b64url_encode(payload)}"
    signature = COORDINATOR_KEY.private_key.sign(signing_input.encode("ascii"))  # type: ignore[call-arg]
    return f"{signing_input}.{b64url_encode(signature)}"


def assert_refused(service: Service, token: str, status: int, reason: str) -> None:
    tasks_before = len(service.app.state.task_store)
    response = service.send(token)
    assert refusal(response)[:2] == (status, reason)
    assert reason in response.headers["www-authenticate"]
    assert len(service.app.state.task_store) == tasks_before


# --- the validity window ---------------------------------------------------------------------


WINDOWS = {
    "exp_before_nbf": lambda now: {"iat": now - 20, "nbf": now + 10, "exp": now + 5},
    "exp_equals_iat": lambda now: {"iat": now - 10, "nbf": now - 10, "exp": now - 10},
    "exp_equals_nbf": lambda now: {"iat": now - 10, "nbf": now, "exp": now},
    "nbf_before_iat": lambda now: {"iat": now, "nbf": now - 10, "exp": now + 100},
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_a_token_that_can_never_be_valid_is_refused(service: Service, name: str) -> None:
    assert_refused(service, service.token(**WINDOWS[name](_now())), 401, "validity_window_invalid")


def test_the_edges_of_the_window_are_accepted(service: Service) -> None:
    """``iat == nbf`` and ``exp == nbf + 1`` is the smallest window there is."""
    now = _now()
    response = service.send(service.token(iat=now - 5, nbf=now - 5, exp=now + 60))
    assert response.status_code == 200 and "result" in response.json(), response.text


def test_time_checks_against_now_keep_their_reasons(service: Service) -> None:
    """An expired token is still token_expired, a future iat still issued_in_future."""
    now = _now()
    expired = service.token(iat=now - 300, nbf=now - 300, exp=now - 120)
    assert_refused(service, expired, 401, "token_expired")
    assert_refused(service, service.token(iat=now + 240), 401, "issued_in_future")


# --- one spelling: UTF-8 without BOM ---------------------------------------------------------


ENCODINGS = {
    "utf-8-bom": lambda text: codecs.BOM_UTF8 + text.encode("utf-8"),
    "utf-16-le": lambda text: text.encode("utf-16-le"),
    "utf-16-be": lambda text: text.encode("utf-16-be"),
    "utf-16-bom": lambda text: text.encode("utf-16"),
    "utf-32-le": lambda text: text.encode("utf-32-le"),
    "utf-32-be": lambda text: text.encode("utf-32-be"),
    "utf-32-bom": lambda text: text.encode("utf-32"),
    "cesu-surrogate": lambda text: (
        text.encode("utf-8")[:-1] + b',"x":"\xed\xa0\x80"}'
    ),  # an encoded lone surrogate, not UTF-8
}


@pytest.mark.parametrize("segment", ["header", "payload"])
@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_header_and_payload_are_utf8_without_bom(
    service: Service, segment: str, encoding: str
) -> None:
    head = json.dumps(header())
    payload = json.dumps(service.claims())
    spell = ENCODINGS[encoding]
    if segment == "header":
        token = raw_token(spell(head), payload.encode())
    else:
        token = raw_token(head.encode(), spell(payload))
    assert_refused(service, token, 401, "token_encoding_invalid")


def test_plain_utf8_is_accepted(service: Service) -> None:
    token = raw_token(json.dumps(header()).encode(), json.dumps(service.claims()).encode())
    assert service.send(token).json()["result"]["task"]["status"]["state"]


# --- a continuation keeps the binding of the task it continues ------------------------------


def message(
    data: Any, handoff: str, attempt: int = 1, task_id: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messageId": f"inv-m-{next(_ids)}",
        "role": "ROLE_USER",
        "parts": [{"data": data, "mediaType": "application/json"}],
        "metadata": {"handoffId": handoff, "attempt": attempt, "skillId": RISK.skill},
    }
    if task_id is not None:
        body["taskId"] = task_id
    return {"message": body}


def token_for(service: Service, handoff: str, attempt: int = 1, **claims: Any) -> str:
    grant = tokens.with_handoff(service.claims(**claims), id=handoff, attempt=attempt)
    return tokens.forge(header(), grant)


def waiting_task(service: Service, handoff: str) -> dict[str, Any]:
    """A task of ``handoff`` waiting for input (the policy record is missing)."""
    response = service.post(
        "SendMessage", message(risk_input("missing"), handoff), token_for(service, handoff)
    )
    task: dict[str, Any] = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return task


@risk_only
def test_a_token_of_another_handoff_cannot_continue_the_task(service: Service) -> None:
    """The observed attack: a token bound to handoff Y continues X's task. Refused (a
    token sees only its own handoff's tasks, so X's is not found), and the task is
    untouched."""
    task = waiting_task(service, "handoff-x")
    params = message(risk_input(), "handoff-y", task_id=task["id"])
    response = service.post("SendMessage", params, token_for(service, "handoff-y"))
    assert response.json()["error"]["code"] == -32001  # TaskNotFound
    after = service.post("GetTask", {"id": task["id"]}, token_for(service, "handoff-x")).json()
    assert after["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert binding_of(after["result"]) == {"handoffId": "handoff-x", "attempt": 1}
    assert len(after["result"].get("history", [])) == len(task.get("history", []))


@risk_only
def test_the_message_cannot_name_the_task_handoff_with_another_token(service: Service) -> None:
    task = waiting_task(service, "handoff-x2")
    params = message(risk_input(), "handoff-x2", task_id=task["id"])
    response = service.post("SendMessage", params, token_for(service, "handoff-y2"))
    assert refusal(response)[:2] == (403, "handoff_mismatch")


@risk_only
def test_another_attempt_cannot_continue_the_task(service: Service) -> None:
    task = waiting_task(service, "handoff-x3")
    params = message(risk_input(), "handoff-x3", attempt=2, task_id=task["id"])
    response = service.post("SendMessage", params, token_for(service, "handoff-x3", attempt=2))
    assert refusal(response)[:2] == (403, "continuation_mismatch")


@risk_only
def test_another_principal_cannot_continue_the_task(service: Service) -> None:
    """The same handoff under another subject or tenant does not find the task."""
    task = waiting_task(service, "handoff-x4")
    for other in ({"sub": "mallory"}, {"tenant": "tenant-b"}):
        params = message(risk_input(), "handoff-x4", task_id=task["id"])
        answer = service.post("SendMessage", params, token_for(service, "handoff-x4", **other))
        assert answer.status_code == 200 and answer.json()["error"]["code"] == -32001


@risk_only
def test_the_same_binding_continues_the_task(service: Service) -> None:
    task = waiting_task(service, "handoff-x5")
    params = message(risk_input(), "handoff-x5", task_id=task["id"])
    answer = service.post("SendMessage", params, token_for(service, "handoff-x5"))
    assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
