"""SendMessage, GetTask, ListTasks and CancelTask against a running risk service."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request

from contracts.evidence import Finding, FindingStatus
from contracts.wire import JSONObject, ListTasksResponse, Task, TaskState
from member_kit.server.agent import run_skill
from member_kit.server.jsonrpc import CallContext
from remote_risk.service import RiskSkill
from tests.remote_risk.conftest import (
    RiskPeer,
    error_of,
    risk_input,
    risk_peer,
    user_message,
)


def finding_in_artifact(task: dict[str, Any]) -> Finding:
    (artifact,) = task["artifacts"]
    (part,) = artifact["parts"]
    assert part["mediaType"] == "application/json"
    return Finding.model_validate(part["data"])


def finding_in_status(task: dict[str, Any]) -> Finding:
    message = task["status"]["message"]
    assert message["role"] == "ROLE_AGENT"
    (part,) = message["parts"]
    assert part["mediaType"] == "application/json"
    return Finding.model_validate(part["data"])


def wait_for_state(peer: RiskPeer, task_id: str, state: str) -> dict[str, Any]:
    deadline = time.monotonic() + 5
    while True:
        task: dict[str, Any] = peer.result("GetTask", {"id": task_id})
        if task["status"]["state"] == state or time.monotonic() > deadline:
            return task
        time.sleep(0.02)


def test_blocking_send_returns_completed_task_with_finding(peer: RiskPeer) -> None:
    """By default SendMessage waits and returns a COMPLETED task with the Finding as artifact."""
    task = peer.send(risk_input("handoff"))
    Task.model_validate(task)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["timestamp"].endswith("Z")
    finding = finding_in_artifact(task)
    assert finding.status is FindingStatus.OK
    assert finding.facts == {"refund_execution_permitted": False, "privacy_review_required": True}
    assert finding.evidence_ids == ("risk-policy-007", "brief-001")
    assert task["artifacts"][0]["parts"][0]["data"]["evidenceIds"] == [
        "risk-policy-007",
        "brief-001",
    ]


def test_missing_policy_interrupts_for_input(peer: RiskPeer) -> None:
    """Without a policy note the task stops in INPUT_REQUIRED with a needs_input Finding."""
    task = peer.send(risk_input("missing"))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    finding = finding_in_status(task)
    assert finding.status is FindingStatus.NEEDS_INPUT
    assert finding.facts["missing_inputs"] == ["policy_note"]
    assert "artifacts" not in task


def test_input_required_task_completes_after_a_further_message(peer: RiskPeer) -> None:
    """A follow-up carrying the taskId and the full context completes the same task."""
    first = peer.send(risk_input("missing"))
    message = user_message(risk_input("ok"), taskId=first["id"], contextId=first["contextId"])
    task = peer.result("SendMessage", {"message": message})["task"]
    assert task["id"] == first["id"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m["role"] for m in task["history"]] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]
    assert finding_in_artifact(task).status is FindingStatus.OK


def test_skill_failure_fails_the_task_with_error_code(peer: RiskPeer) -> None:
    """simulate_failure makes the task FAILED with a failed Finding carrying its error code."""
    task = peer.send(risk_input("failure"))
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    finding = finding_in_status(task)
    assert finding.status is FindingStatus.FAILED
    assert finding.error_code == "policy_engine_unavailable"
    assert task["status"]["message"]["parts"][0]["data"]["errorCode"] == "policy_engine_unavailable"


def test_return_immediately_answers_before_the_skill_finishes(peer: RiskPeer) -> None:
    """returnImmediately answers with a SUBMITTED task that later completes in the background."""
    task = peer.send(risk_input("ok"), {"returnImmediately": True})
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert "artifacts" not in task
    later = wait_for_state(peer, task["id"], "TASK_STATE_COMPLETED")
    assert later["status"]["state"] == "TASK_STATE_COMPLETED"
    assert finding_in_artifact(later).status is FindingStatus.OK


def test_get_task_honours_history_length(peer: RiskPeer) -> None:
    """GetTask returns the most recent historyLength messages, none for 0, all when unset."""
    first = peer.send(risk_input("missing"))
    follow_up = user_message(risk_input("ok"), taskId=first["id"])
    peer.result("SendMessage", {"message": follow_up})
    full = peer.result("GetTask", {"id": first["id"]})
    assert len(full["history"]) == 3
    last = peer.result("GetTask", {"id": first["id"], "historyLength": 1})
    assert [m["messageId"] for m in last["history"]] == [follow_up["messageId"]]
    assert "history" not in peer.result("GetTask", {"id": first["id"], "historyLength": 0})
    assert (
        error_of(peer.call("GetTask", {"id": first["id"], "historyLength": -1}))["code"] == -32602
    )


def test_send_message_honours_history_length(peer: RiskPeer) -> None:
    """configuration.historyLength 0 leaves history out of the SendMessage answer."""
    task = peer.send(risk_input("ok"), {"historyLength": 0})
    assert "history" not in task


def test_list_tasks_pages_newest_first(peer: RiskPeer) -> None:
    """ListTasks pages with opaque tokens, newest first, artifacts only when asked."""
    sent = [peer.send(risk_input("ok"))["id"] for _ in range(5)]
    first = ListTasksResponse.model_validate(peer.result("ListTasks", {"pageSize": 2}))
    assert (first.total_size, first.page_size) == (5, 2)
    assert [t.id for t in first.tasks] == [sent[4], sent[3]]
    assert all(t.artifacts is None for t in first.tasks)
    rest = peer.result("ListTasks", {"pageToken": first.next_page_token, "includeArtifacts": True})
    assert [t["id"] for t in rest["tasks"]] == [sent[2], sent[1], sent[0]]
    assert all(t["artifacts"] for t in rest["tasks"])
    assert rest["nextPageToken"] == ""
    too_big = error_of(peer.call("ListTasks", {"pageSize": 101}))
    assert too_big["code"] == -32602 and "params.pageSize" in too_big["message"]


def test_cancel_of_working_task_cancels_it_for_good() -> None:
    """CancelTask on a WORKING task answers CANCELED and the skill's result never lands."""
    with risk_peer(skill_delay_seconds=0.3) as slow:
        task = slow.send(risk_input("ok"), {"returnImmediately": True})
        wait_for_state(slow, task["id"], "TASK_STATE_WORKING")
        canceled = slow.result("CancelTask", {"id": task["id"]})
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        time.sleep(0.5)
        after = slow.result("GetTask", {"id": task["id"]})
    assert after["status"]["state"] == "TASK_STATE_CANCELED"
    assert "artifacts" not in after


def owner_from_header(request: Request, method: str, params: JSONObject) -> CallContext:
    return CallContext(owner=request.headers.get("x-test-owner", "anonymous"))


def test_tasks_are_scoped_to_the_authorized_owner() -> None:
    """The authorize hook's owner scopes tasks: another owner sees TaskNotFound and no tasks."""
    with risk_peer(authorize=owner_from_header) as scoped:
        params = {"message": user_message(risk_input())}
        alice = scoped.call("SendMessage", params, **{"x-test-owner": "alice"})["result"]["task"]
        as_bob = scoped.call("GetTask", {"id": alice["id"]}, **{"x-test-owner": "bob"})
        bob_list = scoped.call("ListTasks", {}, **{"x-test-owner": "bob"})["result"]
        as_alice = scoped.call("GetTask", {"id": alice["id"]}, **{"x-test-owner": "alice"})
    assert error_of(as_bob)["code"] == -32001
    assert bob_list["totalSize"] == 0
    assert as_alice["result"]["id"] == alice["id"]


def test_recorded_bodies_are_the_exact_bytes_received() -> None:
    """With record_requests the app keeps each raw request body, byte for byte."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).encode()
    with risk_peer(record_requests=True) as recording:
        recording.post_raw(body, {"Content-Type": "application/json", "A2A-Version": "1.0"})
        recording.post_raw(b"not json", {"Content-Type": "application/json"})
        received = list(recording.app.state.received_bodies)
    assert received == [body, b"not json"]


def test_requests_are_not_recorded_by_default(peer: RiskPeer) -> None:
    """Without record_requests no bodies are kept."""
    peer.send(risk_input())
    assert peer.app.state.received_bodies is None


def test_finding_states_round_trip_as_task_states() -> None:
    """The three skill outcomes map to COMPLETED, INPUT_REQUIRED and FAILED."""
    states = [run_skill(RiskSkill(), risk_input(case))[0] for case in ("ok", "missing", "failure")]
    assert states == [TaskState.COMPLETED, TaskState.INPUT_REQUIRED, TaskState.FAILED]


def refuse_without_token(request: Request, method: str, params: JSONObject) -> CallContext:
    if "authorization" not in request.headers:
        raise HTTPException(401, "credentials required", headers={"WWW-Authenticate": "Bearer"})
    return CallContext(owner="token-holder")


def test_authorize_hook_can_refuse_before_anything_is_done() -> None:
    """An authorizer raising HTTP 401 answers 401 and no task is created."""
    with risk_peer(authorize=refuse_without_token) as guarded:
        params = {"message": user_message(risk_input())}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        refused = guarded.post_raw(body.encode(), headers)
        store_size = len(guarded.app.state.task_store)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    assert store_size == 0
