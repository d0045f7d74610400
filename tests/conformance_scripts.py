"""The conformance agent's scripts: what a message makes it do, by its ``messageId`` prefix.

A test fixture's table (see :mod:`tests.conformance_agent` for the list), kept apart from
the agent so that each module holds one thing.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import Any

from contracts.wire import Artifact, Part, TaskState


@dataclass(frozen=True)
class Status:
    state: TaskState
    text: str | None = None


@dataclass(frozen=True)
class ArtifactStep:
    artifact: Artifact
    append: bool | None = None
    last_chunk: bool | None = None


@dataclass(frozen=True)
class Wait:
    long_task: bool = True


Step = Status | ArtifactStep | Wait


def _text_artifact(text: str, artifact_id: str = "") -> Artifact:
    return Artifact(artifact_id=artifact_id or new_id(), parts=[Part(text=text)])


def _file_artifact() -> Artifact:
    raw = base64.b64encode(b"TCK file content").decode("ascii")
    part = Part(raw=raw, filename="output.txt", media_type="text/plain")
    return Artifact(artifact_id=new_id(), parts=[part])


def _url_artifact() -> Artifact:
    part = Part(
        url="https://example.com/output.txt", filename="output.txt", media_type="text/plain"
    )
    return Artifact(artifact_id=new_id(), parts=[part])


def _data_artifact() -> Artifact:
    part = Part(data={"key": "value", "count": 42}, media_type="application/json")
    return Artifact(artifact_id=new_id(), parts=[part])


def new_id() -> str:
    return str(uuid.uuid4())


def _streamed(artifact: Artifact) -> list[Step]:
    working, done = Status(TaskState.WORKING), Status(TaskState.COMPLETED)
    return [working, ArtifactStep(artifact, last_chunk=True), done]


def _chunked() -> list[Step]:
    artifact_id = new_id()
    return [
        Status(TaskState.WORKING),
        ArtifactStep(_text_artifact("chunk-1 ", artifact_id), append=False, last_chunk=False),
        ArtifactStep(_text_artifact("chunk-2", artifact_id), append=True, last_chunk=True),
        Status(TaskState.COMPLETED),
    ]


def _completed_with(artifact: Artifact) -> list[Step]:
    return [ArtifactStep(artifact, last_chunk=True), Status(TaskState.COMPLETED)]


def script_for(message_id: str) -> list[Step] | str:
    """The steps a message with ``message_id`` asks for, or the text of a direct reply."""
    scripts: dict[str, Any] = {
        "tck-complete-task": lambda: [Status(TaskState.COMPLETED, "Hello from TCK")],
        "tck-artifact-text": lambda: _completed_with(_text_artifact("Generated text content")),
        "tck-artifact-file": lambda: _completed_with(_file_artifact()),
        "tck-artifact-file-url": lambda: _completed_with(_url_artifact()),
        "tck-artifact-data": lambda: _completed_with(_data_artifact()),
        "tck-message-response": lambda: "Direct message response",
        "tck-input-required": lambda: [Status(TaskState.INPUT_REQUIRED, "Input required")],
        "tck-reject-task": lambda: [Status(TaskState.REJECTED, "rejected")],
        "tck-stream-001": lambda: _streamed(_text_artifact("Stream hello from TCK")),
        "tck-stream-002": lambda: [Status(TaskState.COMPLETED)],
        "tck-stream-003": lambda: _streamed(_text_artifact("Stream task lifecycle")),
        "tck-stream-ordering-001": lambda: _streamed(_text_artifact("Ordered output")),
        "tck-stream-artifact-text": lambda: _streamed(_text_artifact("Streamed text content")),
        "tck-stream-artifact-file": lambda: _streamed(_file_artifact()),
        "tck-stream-artifact-chunked": _chunked,
        "test-resubscribe-message-id": lambda: [
            Status(TaskState.WORKING),
            Wait(),
            Status(TaskState.COMPLETED),
        ],
    }
    matching = [prefix for prefix in scripts if message_id.startswith(prefix)]
    if not matching:
        return [Status(TaskState.COMPLETED, "Hello from TCK")]
    result: list[Step] | str = scripts[max(matching, key=len)]()
    return result
