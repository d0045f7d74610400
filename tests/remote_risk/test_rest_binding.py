"""The HTTP+JSON binding of a token-checking remote_risk, over real HTTP on loopback.

Every call carries the same delegation token the JSON-RPC binding takes (its audience is
the agent id, the JSON-RPC URL) and goes through the same checks: a send without a
token, with another handoff's token, or with a replayed token is refused exactly as on
JSON-RPC, here as a ``google.rpc.Status`` body.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from remote_risk.settings import REST_PATH
from tests.remote_risk.conftest import binding_of, risk_input
from tests.remote_risk.delegated import SKILL, Caller, delegated_service

MEDIA = "application/a2a+json"


@pytest.fixture
def service() -> Iterator[Caller]:
    with delegated_service() as (caller, _app):
        yield caller


def rest(
    caller: Caller, verb: str, path: str, token: str | None, body: Any = None, **query: Any
) -> httpx.Response:
    headers = {"A2A-Version": "1.0", "Content-Type": MEDIA}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    content = None if body is None else httpx.Request("POST", "/", json=body).read()
    url = caller.base_url + REST_PATH + path
    return httpx.request(verb, url, content=content, headers=headers, params=query, timeout=10)


def message(handoff_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "message": {
            "messageId": f"m-{handoff_id}",
            "role": "ROLE_USER",
            "parts": [{"data": risk_input(), "mediaType": "application/json"}],
            "metadata": {"handoffId": handoff_id, "attempt": 1, "skillId": SKILL},
            **extra,
        }
    }


def status_of(response: httpx.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    (info,) = error["details"]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    reason = info.get("metadata", {}).get("reason", info["reason"])
    return response.status_code, error["status"], reason


def test_a_delegated_send_completes_and_reads_back(service: Caller) -> None:
    sent = rest(service, "POST", "/message:send", service.token("h-rest-1"), message("h-rest-1"))
    assert sent.status_code == 200, sent.text
    assert sent.headers["content-type"] == MEDIA
    task = sent.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert binding_of(task) == {"handoffId": "h-rest-1", "attempt": 1}
    got = rest(service, "GET", f"/tasks/{task['id']}", service.token("h-rest-1"), historyLength=0)
    assert got.status_code == 200, got.text
    assert got.json()["id"] == task["id"]
    listed = rest(service, "GET", "/tasks", service.token("h-rest-1"), pageSize=5)
    assert [t["id"] for t in listed.json()["tasks"]] == [task["id"]]
    # a token of another handoff sees none of it
    elsewhere = rest(service, "GET", f"/tasks/{task['id']}", service.token("lookup"))
    assert elsewhere.status_code == 404, elsewhere.text
    assert rest(service, "GET", "/tasks", service.token("lookup")).json()["tasks"] == []


def test_the_tenant_variant_routes_the_same_operation(service: Caller) -> None:
    """/{tenant}/...: the tenant is the request's tenant param, held to the token's."""
    token = service.token("h-rest-tenant")
    sent = rest(service, "POST", "/tenant-a/message:send", token, message("h-rest-tenant"))
    assert sent.status_code == 200, sent.text
    task_id = sent.json()["task"]["id"]
    got = rest(service, "GET", f"/tenant-a/tasks/{task_id}", service.token("h-rest-tenant"))
    assert got.status_code == 200, got.text
    other = rest(service, "GET", f"/tenant-x/tasks/{task_id}", service.token("h-rest-tenant"))
    assert status_of(other) == (403, "PERMISSION_DENIED", "tenant_mismatch")


def test_no_token_is_refused_before_the_body_is_read(service: Caller) -> None:
    response = rest(service, "POST", "/message:send", None, message("h-rest-2"))
    assert status_of(response) == (401, "UNAUTHENTICATED", "token_missing")
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_token_for_another_handoff_is_refused(service: Caller) -> None:
    response = rest(service, "POST", "/message:send", service.token("other"), message("h-rest-3"))
    assert status_of(response)[:2] == (403, "PERMISSION_DENIED")


def test_a_replayed_token_is_refused(service: Caller) -> None:
    token = service.token("h-rest-4")
    first = rest(service, "POST", "/message:send", token, message("h-rest-4"))
    assert first.status_code == 200, first.text
    again = message("h-rest-4")
    again["message"]["messageId"] = "m-again"
    replay = rest(service, "POST", "/message:send", token, again)
    assert status_of(replay)[2] == "replayed_jti"


def test_unknown_task_is_404_not_found(service: Caller) -> None:
    response = rest(service, "GET", "/tasks/no-such-task", service.token("lookup"))
    assert status_of(response) == (404, "NOT_FOUND", "TASK_NOT_FOUND")


def test_an_unknown_route_and_a_wrong_media_type(service: Caller) -> None:
    assert rest(service, "GET", "/nothing-here", service.token("lookup")).status_code == 404
    headers = {
        "A2A-Version": "1.0",
        "Content-Type": "text/plain",
        "Authorization": f"Bearer {service.token('h-rest-5')}",
    }
    url = service.base_url + REST_PATH + "/message:send"
    response = httpx.post(url, content=b"hello", headers=headers, timeout=10)
    assert status_of(response)[2] == "CONTENT_TYPE_NOT_SUPPORTED"


def test_unknown_members_are_ignored(service: Caller) -> None:
    body = message("h-rest-6", futureField=1)
    body["futureTop"] = {"x": 1}
    response = rest(service, "POST", "/message:send", service.token("h-rest-6"), body)
    assert response.status_code == 200, response.text


def test_a_stream_is_sse_of_stream_responses(service: Caller) -> None:
    headers = {
        "A2A-Version": "1.0",
        "Content-Type": MEDIA,
        "Authorization": f"Bearer {service.token('h-rest-7')}",
    }
    url = service.base_url + REST_PATH + "/message:stream"
    body = httpx.Request("POST", "/", json=message("h-rest-7")).read()
    with httpx.stream("POST", url, content=body, headers=headers, timeout=10) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    first = httpx.Response(200, content=lines[0][6:]).json()
    assert "task" in first
    last = httpx.Response(200, content=lines[-1][6:]).json()
    assert last.get("statusUpdate", last.get("task", {})).get("status", {}).get("state") == (
        "TASK_STATE_COMPLETED"
    )
