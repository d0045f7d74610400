"""Every JSON-RPC and A2A error the risk service answers, provoked with raw HTTP on loopback."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.requests import Request

from contracts.wire import JSONObject
from member_kit.server.jsonrpc import CallContext
from tests.remote_risk.conftest import (
    RiskPeer,
    error_of,
    reason,
    risk_input,
    risk_peer,
    user_message,
)

JSON = {"Content-Type": "application/json", "A2A-Version": "1.0"}


def raw_error(peer: RiskPeer, body: bytes, headers: dict[str, str] = JSON) -> dict[str, Any]:
    response = peer.post_raw(body, headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    decoded: dict[str, Any] = response.json()
    assert decoded["jsonrpc"] == "2.0"
    return decoded


def test_malformed_json_is_parse_error(peer: RiskPeer) -> None:
    """Bytes that are not JSON answer -32700 with a null id."""
    decoded = raw_error(peer, b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert decoded["id"] is None
    assert error_of(decoded)["code"] == -32700
    assert reason(error_of(decoded)) == "PARSE_ERROR"


def test_duplicate_keys_are_parse_error(peer: RiskPeer) -> None:
    """A body with a duplicated key is refused rather than read last-one-wins."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"CancelTask","params":{}}'
    assert error_of(raw_error(peer, body))["code"] == -32700


@pytest.mark.parametrize(
    ("document", "message", "echoed_id"),
    [
        ({"jsonrpc": "1.0", "id": 7, "method": "GetTask"}, 'jsonrpc must be exactly "2.0"', 7),
        ({"jsonrpc": "2.0", "id": 7, "params": {}}, "method must be a non-empty string", 7),
        ({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": [1]}, "params must be", 7),
        ({"jsonrpc": "2.0", "method": "GetTask", "params": {}}, "id is required", None),
        ({"jsonrpc": "2.0", "id": True, "method": "GetTask"}, "id must be a string", None),
        ([{"jsonrpc": "2.0", "id": 7, "method": "GetTask"}], "batch requests", None),
    ],
)
def test_bad_envelope_is_invalid_request(
    peer: RiskPeer, document: Any, message: str, echoed_id: int | None
) -> None:
    """A request object that breaks JSON-RPC 2.0 answers -32600 saying what is wrong."""
    decoded = raw_error(peer, json.dumps(document).encode())
    error = error_of(decoded)
    assert error["code"] == -32600
    assert reason(error) == "INVALID_REQUEST"
    assert message in error["message"]
    assert decoded["id"] == echoed_id


def test_unknown_method_is_method_not_found(peer: RiskPeer) -> None:
    """A method this agent does not offer, including a v0.3 name, answers -32601."""
    for method in ("DoSomething", "message/send"):
        error = error_of(peer.call(method, {}))
        assert error["code"] == -32601
        assert reason(error) == "METHOD_NOT_FOUND"
        assert method in error["message"]


def test_invalid_params_message_names_the_field(peer: RiskPeer) -> None:
    """A message without messageId answers -32602 naming params.message.messageId; an
    absent member reads as its default (ProtoJSON omits an empty string), so the verdict is
    the one an empty messageId gets."""
    message = user_message(risk_input())
    del message["messageId"]
    error = error_of(peer.call("SendMessage", {"message": message}))
    assert error["code"] == -32602
    assert reason(error) == "INVALID_PARAMS"
    assert error["message"] == "params.message.messageId: string should have at least 1 character"


def test_invalid_params_lists_several_problems(peer: RiskPeer) -> None:
    """Each offending field is listed with its path, including nested parts."""
    params = {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "data": {}}]},
        "configuration": {"returnImmediately": "yes"},
    }
    message = error_of(peer.call("SendMessage", params))["message"]
    assert (
        "params.message.parts[0]: a part carries exactly one of text, raw, url or data" in message
    )
    assert "params.configuration.returnImmediately: input should be a valid boolean" in message


def test_over_shared_context_is_invalid_params(peer: RiskPeer) -> None:
    """Keys other than brief and policy_note are refused before any task exists."""
    data = {**risk_input(), "private_note": {"text": "secret"}}
    error = error_of(peer.call("SendMessage", {"message": user_message(data)}))
    assert error["code"] == -32602
    assert "params.message.parts[0].data: unexpected keys private_note" in error["message"]
    assert "secret" not in error["message"]
    assert peer.result("ListTasks", {})["totalSize"] == 0


def test_unknown_task_is_task_not_found(peer: RiskPeer) -> None:
    """GetTask, CancelTask and a message referring to an unknown task answer -32001."""
    for method, params in [
        ("GetTask", {"id": "no-such-task"}),
        ("CancelTask", {"id": "no-such-task"}),
        ("SendMessage", {"message": user_message(risk_input(), taskId="no-such-task")}),
    ]:
        error = error_of(peer.call(method, params))
        assert error["code"] == -32001, method
        assert reason(error) == "TASK_NOT_FOUND"


def test_cancel_of_completed_task_is_not_cancelable(peer: RiskPeer) -> None:
    """CancelTask on a completed task answers -32002 and leaves it completed."""
    task = peer.send(risk_input())
    error = error_of(peer.call("CancelTask", {"id": task["id"]}))
    assert error["code"] == -32002
    assert reason(error) == "TASK_NOT_CANCELABLE"
    assert peer.result("GetTask", {"id": task["id"]})["status"]["state"] == "TASK_STATE_COMPLETED"


def test_push_config_to_loopback_is_refused_by_default(peer: RiskPeer) -> None:
    """A push config naming a loopback webhook answers -32602 unless loopback is allowed,
    and no task is opened for it."""
    configuration = {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}}
    params = {"message": user_message(risk_input()), "configuration": configuration}
    error = error_of(peer.call("SendMessage", params))
    assert error["code"] == -32602
    assert "not allowed" in error["message"]
    assert peer.result("ListTasks", {})["tasks"] == []


def test_message_to_terminal_task_is_unsupported(peer: RiskPeer) -> None:
    """A further message to a completed task answers -32004."""
    task = peer.send(risk_input())
    message = user_message(risk_input(), taskId=task["id"])
    error = error_of(peer.call("SendMessage", {"message": message}))
    assert error["code"] == -32004
    assert reason(error) == "UNSUPPORTED_OPERATION"
    assert "TASK_STATE_COMPLETED" in error["message"]


def test_subscribing_to_a_finished_task_is_unsupported(peer: RiskPeer) -> None:
    """SubscribeToTask on a completed task answers -32004 as plain JSON, not a stream."""
    task = peer.send(risk_input())
    error = error_of(peer.call("SubscribeToTask", {"id": task["id"]}))
    assert error["code"] == -32004
    assert reason(error) == "UNSUPPORTED_OPERATION"


def test_text_only_message_is_content_type_not_supported(peer: RiskPeer) -> None:
    """A message without a data part answers -32005."""
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "assess the pilot"}]}
    error = error_of(peer.call("SendMessage", {"message": message}))
    assert error["code"] == -32005
    assert reason(error) == "CONTENT_TYPE_NOT_SUPPORTED"


def test_output_modes_without_json_are_content_type_not_supported(peer: RiskPeer) -> None:
    """acceptedOutputModes that exclude application/json answer -32005."""
    params = {
        "message": user_message(risk_input()),
        "configuration": {"acceptedOutputModes": ["text/plain"]},
    }
    error = error_of(peer.call("SendMessage", params))
    assert error["code"] == -32005
    assert "text/plain" in error["message"]


def test_non_json_http_content_type_is_content_type_not_supported(peer: RiskPeer) -> None:
    """A body sent as text/plain answers -32005 even if the bytes happen to be JSON."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).encode()
    decoded = raw_error(peer, body, {"Content-Type": "text/plain", "A2A-Version": "1.0"})
    assert error_of(decoded)["code"] == -32005


@pytest.mark.parametrize("version", [None, "", "0.3", "2.0"])
def test_missing_or_foreign_version_is_version_not_supported(
    peer: RiskPeer, version: str | None
) -> None:
    """No A2A-Version (meaning 0.3), or a major other than 1, answers -32009."""
    headers = {"Content-Type": "application/json"}
    if version is not None:
        headers["A2A-Version"] = version
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}}).encode()
    decoded = raw_error(peer, body, headers)
    error = error_of(decoded)
    assert error["code"] == -32009
    assert reason(error) == "VERSION_NOT_SUPPORTED"
    assert error["data"][0]["metadata"]["requestedVersion"] == (version or "0.3")
    assert decoded["id"] == 3


def test_any_1x_version_is_accepted(peer: RiskPeer) -> None:
    """Only the major version is checked: 1.2 is served."""
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}}).encode()
    decoded = raw_error(peer, body, {"Content-Type": "application/json", "A2A-Version": "1.2"})
    assert decoded["result"]["tasks"] == []


def test_oversized_body_is_refused() -> None:
    """A body over max_body_bytes answers 413 with -32600 without being parsed."""
    with risk_peer(max_body_bytes=200) as small:
        data = {**risk_input(), "padding": "x" * 500}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": data}}
        response = small.post_raw(json.dumps(body).encode(), JSON)
        assert response.status_code == 413
        error = error_of(response.json())
    assert error["code"] == -32600
    assert "exceeds 200 bytes" in error["message"]


def exploding_authorizer(request: Request, method: str, params: JSONObject) -> CallContext:
    raise RuntimeError("SECRET-DETAIL in /srv/app/internal.py")


def test_unexpected_exception_leaks_nothing() -> None:
    """An unexpected exception answers a generic -32603 with no traceback or exception text."""
    with risk_peer(authorize=exploding_authorizer) as broken:
        response = broken.post_raw(
            json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ListTasks"}).encode(), JSON
        )
    text = response.text
    decoded = response.json()
    assert decoded["id"] == 9
    assert decoded["error"]["code"] == -32603
    assert decoded["error"]["message"] == "internal error"
    for leak in ("SECRET-DETAIL", "Traceback", "RuntimeError", "internal.py"):
        assert leak not in text


def test_store_full_is_a_clear_internal_error() -> None:
    """When every slot holds a live task, SendMessage answers -32603 saying the agent is full."""
    with risk_peer(task_capacity=1) as full:
        full.send(risk_input("missing"))  # stays INPUT_REQUIRED, so it is live
        error = error_of(full.call("SendMessage", {"message": user_message(risk_input())}))
    assert error["code"] == -32603
    assert "at capacity" in error["message"]
    assert error["data"][0]["metadata"] == {"capacity": "1"}
