"""v1.0 requests as v0.3 JSON-RPC params, and v0.3 results as v1.0 wire models.

v0.3 differs in shape, not in meaning: parts carry a ``kind`` (``text``, ``data``,
``file`` with ``uri`` or ``bytes``), roles are ``user`` / ``agent``, objects carry a
``kind`` discriminator, task states are lower-case strings (``input-required``; read
through :data:`coordinator.handoff.state_map.V03_TASK_STATES`), a status update has
``final``, and ``blocking: false`` is v1.0's ``returnImmediately: true``. What comes back
is rebuilt from the fields v0.3 defines and then validated as strictly as any v1.0
answer; fields v0.3 does not define are ignored.
"""

from __future__ import annotations

from typing import Any

from contracts.wire import (
    Message,
    Part,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    to_wire,
)
from coordinator.errors import ProtocolError
from coordinator.handoff.state_map import v03_task_state

ROLES = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}
ROLES_BACK = {v: k for k, v in ROLES.items()}


def _pick(document: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: document[name] for name in names if document.get(name) is not None}


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"a v0.3 {what} is not a JSON object", "invalid_shape")
    return value


# --- what we send ----------------------------------------------------------------------


def part_out(part: Part) -> dict[str, Any]:
    extra = {"metadata": part.metadata} if part.metadata is not None else {}
    if part.text is not None:
        return {"kind": "text", "text": part.text, **extra}
    if part.url is not None or part.raw is not None:
        file = {"uri": part.url} if part.url is not None else {"bytes": part.raw}
        file.update(_pick({"mimeType": part.media_type, "name": part.filename}, "mimeType", "name"))
        return {"kind": "file", "file": file, **extra}
    if not isinstance(part.data, dict):
        raise ProtocolError("a v0.3 data part holds a JSON object only", "v03_unrepresentable")
    return {"kind": "data", "data": part.data, **extra}


def message_out(message: Message) -> dict[str, Any]:
    wire = to_wire(message)
    out = _pick(wire, "messageId", "contextId", "taskId", "metadata", "extensions")
    out.update(_pick(wire, "referenceTaskIds"))
    out["kind"] = "message"
    out["role"] = ROLES.get(message.role.value, "user")
    out["parts"] = [part_out(p) for p in message.parts]
    return out


def send_params(request: SendMessageRequest) -> dict[str, Any]:
    params: dict[str, Any] = {"message": message_out(request.message)}
    config = request.configuration
    if config is not None:
        if config.task_push_notification_config is not None:
            raise ProtocolError(
                "inline push configuration is not sent to v0.3 agents", "v03_unrepresentable"
            )
        out: dict[str, Any] = {}
        if config.accepted_output_modes is not None:
            out["acceptedOutputModes"] = config.accepted_output_modes
        if config.history_length is not None:
            out["historyLength"] = config.history_length
        if config.return_immediately is not None:
            out["blocking"] = not config.return_immediately
        params["configuration"] = out
    if request.metadata is not None:
        params["metadata"] = request.metadata
    return params


# --- what comes back -----------------------------------------------------------------------


def part_in(value: Any) -> dict[str, Any]:
    part = _object(value, "part")
    out = _pick(part, "metadata")
    kind = part.get("kind")
    if kind == "text":
        out["text"] = part.get("text")
    elif kind == "data":
        out["data"] = part.get("data")
    elif kind == "file":
        file = _object(part.get("file"), "file")
        if "uri" in file:
            out["url"] = file["uri"]
        else:
            out["raw"] = file.get("bytes")
        out.update(
            {
                k: file[v]
                for k, v in (("mediaType", "mimeType"), ("filename", "name"))
                if file.get(v) is not None
            }
        )
    else:
        raise ProtocolError(f"a v0.3 part of kind {kind!r}", "invalid_shape")
    return out


def message_in(value: Any) -> dict[str, Any]:
    message = _object(value, "message")
    out = _pick(
        message, "messageId", "contextId", "taskId", "metadata", "extensions", "referenceTaskIds"
    )
    out["role"] = ROLES_BACK.get(str(message.get("role")), "ROLE_UNSPECIFIED")
    out["parts"] = [part_in(p) for p in message.get("parts") or []]
    return out


def status_in(value: Any) -> dict[str, Any]:
    status = _object(value, "task status")
    out = _pick(status, "timestamp")
    out["state"] = v03_task_state(status.get("state")).value
    if status.get("message") is not None:
        out["message"] = message_in(status["message"])
    return out


def artifact_in(value: Any) -> dict[str, Any]:
    artifact = _object(value, "artifact")
    out = _pick(artifact, "artifactId", "name", "description", "metadata", "extensions")
    out["parts"] = [part_in(p) for p in artifact.get("parts") or []]
    return out


def task_document(value: Any) -> dict[str, Any]:
    task = _object(value, "task")
    out = _pick(task, "id", "contextId", "metadata")
    out["status"] = status_in(task.get("status"))
    if task.get("artifacts") is not None:
        out["artifacts"] = [artifact_in(a) for a in task["artifacts"]]
    if task.get("history") is not None:
        out["history"] = [message_in(m) for m in task["history"]]
    return out


def task_in(value: Any) -> Task:
    return Task.model_validate(task_document(value))


def send_result(value: Any) -> SendMessageResponse:
    result = _object(value, "result")
    if result.get("kind") == "message":
        return SendMessageResponse.model_validate({"message": message_in(result)})
    return SendMessageResponse.model_validate({"task": task_document(result)})


def stream_event(value: Any) -> StreamResponse:
    event = _object(value, "stream event")
    kind = event.get("kind")
    if kind == "message":
        return StreamResponse.model_validate({"message": message_in(event)})
    if kind == "status-update":
        update = _pick(event, "taskId", "contextId", "metadata")
        update["status"] = status_in(event.get("status"))
        return StreamResponse.model_validate({"statusUpdate": update})
    if kind == "artifact-update":
        update = _pick(event, "taskId", "contextId", "append", "lastChunk", "metadata")
        update["artifact"] = artifact_in(event.get("artifact"))
        return StreamResponse.model_validate({"artifactUpdate": update})
    return StreamResponse.model_validate({"task": task_document(event)})
