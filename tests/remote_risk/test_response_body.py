"""A success response is serialised in one pass by pydantic; it is the document the
two-step path (``to_wire`` then ``strict_json.dumps``) gives, non-finite floats included."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contracts import strict_json
from contracts.wire import Message, Part, Role, SendMessageResponse, Task, TaskState, TaskStatus
from contracts.wire import to_wire as wire_dict
from member_kit.server.jsonrpc import result_body

TEXTS = [
    "plain",
    "unicodé ✓ 😀",
    'quote " backslash \\ slash /',
    "ctl \x00\x01\x1f\t\n\r\b\f",
    "\u2028\u2029",
]


def response_with(data: Any, text: str) -> SendMessageResponse:
    message = Message(
        message_id="m-1",
        role=Role.USER,
        parts=[Part(text=text), Part(data=data)],
        metadata={"note": text, "data": data},
    )
    task = Task(
        id="t-1",
        context_id="c-1",
        status=TaskStatus(state=TaskState.COMPLETED, timestamp="2026-01-31T12:00:00.000Z"),
        history=[message],
        metadata={"handoffId": "h-1"},
    )
    return SendMessageResponse(task=task)


def two_step(request_id: Any, result: SendMessageResponse) -> bytes:
    return strict_json.dumps({"jsonrpc": "2.0", "id": request_id, "result": wire_dict(result)})


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("request_id", [1, "req-ü", None, 2**70])
def test_without_floats_the_bytes_are_the_same(text: str, request_id: Any) -> None:
    data = {"k": [1, -2, 2**63, True, False, None, {"nested": text}], "empty": {}, "list": []}
    result = response_with(data, text)
    assert result_body(request_id, result) == two_step(request_id, result)


@pytest.mark.parametrize(
    "number", [0.1, -0.0, 1e16, 1e-7, 1.7976931348623157e308, 5e-324, 123456789.125]
)
def test_floats_parse_to_the_same_values(number: float) -> None:
    result = response_with({"x": number, "xs": [number, 1.5]}, "f")
    assert json.loads(result_body(7, result)) == json.loads(two_step(7, result))


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_float_becomes_null_as_before_never_a_bare_token(number: float) -> None:
    result = response_with({"x": number}, "f")
    body = result_body(7, result)
    assert body == two_step(7, result)
    assert strict_json.loads(body)["result"]["task"]["history"][0]["parts"][1]["data"] == {
        "x": None
    }
