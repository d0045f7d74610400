"""The shared wire code of the bindings: ProtoJSON mapping, error statuses, lenient parsing."""

from __future__ import annotations

from agent_cards.bindings.grpc import a2a_pb2
from agent_cards.bindings.lenient import known_part
from agent_cards.bindings.protojson import from_proto, to_proto, unknown_paths
from agent_cards.bindings.status import status_json, status_proto
from contracts import a2a_errors, wire


def test_a_task_survives_the_round_trip_through_protobuf_with_whole_numbers() -> None:
    """Data parts travel as Struct (doubles); a whole number comes back an integer."""
    task = wire.Task(
        id="t-1",
        status=wire.TaskStatus(state=wire.TaskState.COMPLETED),
        metadata={"handoffId": "h-1", "attempt": 1},
        artifacts=[wire.Artifact(artifact_id="a", parts=[wire.Part(data={"n": [1, 2.5]})])],
    )
    back = from_proto(to_proto(task, a2a_pb2.Task), wire.Task)
    assert back == task
    assert back.metadata is not None
    assert type(back.metadata["attempt"]) is int


def test_a_data_part_holding_json_null_survives_the_round_trip_through_protobuf() -> None:
    """A ``Value`` set to null is content: it arrives over gRPC and leaves again."""
    message = wire.Message.model_validate(
        {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": None}, {"text": "t"}]}
    )
    back = from_proto(to_proto(message, a2a_pb2.Message), wire.Message)
    assert back == message
    assert wire.to_wire(back)["parts"] == [{"data": None}, {"text": "t"}]


def test_defaults_a_model_requires_are_put_back() -> None:
    """proto3 omits zero values when printing; the last page's empty token is required."""
    page = from_proto(a2a_pb2.ListTasksResponse(), wire.ListTasksResponse)
    assert (page.tasks, page.next_page_token, page.page_size, page.total_size) == ([], "", 0, 0)
    task = from_proto(a2a_pb2.Task(id="x", status=a2a_pb2.TaskStatus()), wire.Task)
    assert task.status.state is wire.TaskState.UNSPECIFIED


def test_unknown_members_are_named_and_left_out_at_every_depth() -> None:
    document = {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "p": 1}]},
        "configuration": {"historyLength": 2, "future": True},
        "top": 3,
    }
    known, ignored = known_part(wire.SendMessageRequest, document)
    assert sorted(ignored) == ["configuration.future", "message.parts[0].p", "top"]
    wire.SendMessageRequest.model_validate(known)


def test_metadata_is_not_walked() -> None:
    """Free-form members are the reader's to judge (a Finding stays strict)."""
    document = {"id": "t", "metadata": {"anything": {"deep": 1}}}
    assert known_part(wire.CancelTaskRequest, document) == (document, [])


def test_error_status_follows_the_spec_table() -> None:
    body = status_json(a2a_errors.TASK_NOT_FOUND, "no task", {"taskId": "t"})["error"]
    assert (body["code"], body["status"]) == (404, "NOT_FOUND")
    assert body["details"][0]["reason"] == "TASK_NOT_FOUND"
    status = status_proto(a2a_errors.TASK_NOT_CANCELABLE, "done already")
    assert status.code == 9  # FAILED_PRECONDITION
    assert status.details[0].type_url == a2a_errors.ERROR_INFO_TYPE


def test_fields_a_proto_does_not_define_are_found_at_depth() -> None:
    """A newer peer's field (number 101 here) survives parsing; we name where it was."""
    request = a2a_pb2.SendMessageRequest()
    request.message.message_id = "m"
    request.message.parts.add(text="x")
    extra = bytes([0xA8, 0x06, 0x01])  # field 101, varint 1
    part = request.message.parts[0].SerializeToString() + extra
    message = request.message.SerializeToString()
    raw = a2a_pb2.Message.FromString(message)
    del raw.parts[:]
    raw.parts.append(a2a_pb2.Part.FromString(part))
    outer = a2a_pb2.SendMessageRequest(message=raw).SerializeToString() + extra
    parsed = a2a_pb2.SendMessageRequest.FromString(outer)
    assert sorted(unknown_paths(parsed)) == ["#101", "message.parts[0].#101"]
