"""Issue 18's observations on the protocol envelope, each against a real service.

- A POST on the JSON-RPC URL with a trailing slash is served, not redirected (it was
  answered ``307`` with an empty body, which the A2A TCK's client cannot follow).
- Unknown request fields are ignored, not refused (``-32602 extra inputs are not
  permitted`` before): the spec says implementations SHOULD ignore unrecognised fields.
  Each ignored field is counted (``remote_risk_ignored_fields_total``).
- A continuation of an unknown task answers ``-32001`` TaskNotFound whatever its content
  (a text part made it ``-32005`` before: content was checked before the task).
"""

from __future__ import annotations

import httpx

from member_kit.server.app import JSONRPC_PATH
from tests.remote_risk.conftest import RiskPeer, error_of, risk_input, user_message

HEADERS = {"A2A-Version": "1.0"}


def test_a_trailing_slash_on_the_jsonrpc_url_is_served_without_redirect(peer: RiskPeer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}
    response = httpx.post(
        peer.base_url + JSONRPC_PATH + "/", json=body, headers=HEADERS, timeout=10
    )
    assert response.status_code == 200
    assert error_of(response.json())["code"] == -32001


def ignored_so_far(peer: RiskPeer) -> float:
    """The service runs in this process (a thread), so its app's counter is readable here."""
    registry = peer.app.state.telemetry.metrics.registry
    return (
        registry.get_sample_value("remote_risk_ignored_fields_total", {"binding": "jsonrpc"}) or 0.0
    )


def test_an_unknown_field_in_params_is_ignored_and_counted(peer: RiskPeer) -> None:
    before = ignored_so_far(peer)
    message = user_message(risk_input("ok"), futureMessageField={"x": 1})
    params = {"message": message, "futureTopLevelField": True}
    task = peer.result("SendMessage", params)["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert ignored_so_far(peer) - before == 2


def test_an_unknown_envelope_member_is_ignored(peer: RiskPeer) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "x"}, "v2": 1}
    decoded = peer.post_raw(
        httpx.Request("POST", "/", json=body).read(),
        {"Content-Type": "application/json", **HEADERS},
    ).json()
    assert error_of(decoded)["code"] == -32001


def test_a_continuation_of_an_unknown_task_is_task_not_found_before_content(
    peer: RiskPeer,
) -> None:
    message = {
        "messageId": "m-unknown-task",
        "role": "ROLE_USER",
        "taskId": "no-such-task",
        "parts": [{"text": "not the data part the skill takes"}],
    }
    assert error_of(peer.call("SendMessage", {"message": message}))["code"] == -32001
