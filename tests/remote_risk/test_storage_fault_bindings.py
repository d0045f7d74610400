"""A database fault says the same thing on every binding: unavailable now, try again.

remote_risk serves JSON-RPC, HTTP+JSON and gRPC from one data directory, whose SQLite
database (and WAL) is then made read-only (:mod:`tests.faults`). The same SendMessage,
each with a fresh, valid token, goes over each binding the served card lists, as a stock
client of that binding would send it. Each answer names ``storage_unavailable`` with
``retryAfterSeconds`` and a status its binding's clients read as transient: HTTP 503 with
``Retry-After`` (JSON-RPC and HTTP+JSON, whose ``google.rpc.Status`` body says
``UNAVAILABLE`` and 503 too), gRPC ``UNAVAILABLE``. (Before, gRPC answered ``INTERNAL``
and the HTTP+JSON body said ``INTERNAL`` 500 under an HTTP 503.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from member_kit.storage.engine import DATABASE_FILE
from tests.faults import database_files, immutable_flag_works, read_only
from tests.remote_risk.delegated import Caller, delegated_service
from tests.remote_risk.test_bindings_same_checks import VERIFY, headers, served_interfaces
from tests.servers import free_port

# (binding's status, HTTP status or None, ErrorInfo metadata) of one refused send
Answer = tuple[str, int | None, dict[str, str]]


def message(caller: Caller, handoff: str) -> dict[str, Any]:
    data = caller.member.valid_input()
    metadata = {"handoffId": handoff, "attempt": 1, "skillId": caller.member.skill}
    return {
        "message": {
            "messageId": f"m-{handoff}",
            "role": "ROLE_USER",
            "parts": [{"data": data, "mediaType": "application/json"}],
            "metadata": metadata | {"idempotencyKey": f"run-1:{handoff}"},
        }
    }


def over_jsonrpc(url: str, caller: Caller, handoff: str) -> Answer:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message(caller, handoff)}
    sent = headers(caller.token(handoff))
    response = httpx.post(url, json=body, headers=sent, timeout=10, verify=VERIFY)
    (info,) = response.json()["error"]["data"]
    assert response.headers["Retry-After"] == "2"
    return str(response.status_code), response.status_code, info["metadata"]


def over_rest(url: str, caller: Caller, handoff: str) -> Answer:
    sent = headers(caller.token(handoff)) | {"Content-Type": "application/a2a+json"}
    body = message(caller, handoff)
    response = httpx.post(url + "/message:send", json=body, headers=sent, timeout=10, verify=VERIFY)
    error = response.json()["error"]
    (info,) = error["details"]
    assert response.headers["Retry-After"] == "2"
    assert error["code"] == response.status_code  # the body says what the status says
    return error["status"], response.status_code, info["metadata"]


def over_grpc(address: str, caller: Caller, handoff: str) -> Answer:
    request = json_format.ParseDict(message(caller, handoff), a2a_pb2.SendMessageRequest())
    pairs = [(k.lower(), v) for k, v in headers(caller.token(handoff)).items()]

    async def send() -> Any:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            return await stub.SendMessage(request, metadata=pairs, timeout=10)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        asyncio.run(send())
    trailers = dict(raised.value.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    assert status.code == raised.value.code().value[0]
    return raised.value.code().name, None, dict(info.metadata)


SEND = {"JSONRPC": over_jsonrpc, "HTTP+JSON": over_rest, "GRPC": over_grpc}


def test_each_binding_answers_a_database_fault_as_unavailable(tmp_path: Path) -> None:
    if not immutable_flag_works(tmp_path):
        pytest.skip("this filesystem has no immutable flag (chattr +i)")
    with delegated_service(data_dir=tmp_path, grpc_port=free_port()) as (caller, _):
        listed = served_interfaces(caller.base_url)
        assert set(listed) == set(SEND)
        caller.task_of(caller.send("run-1", "h-warm"))  # keys, caches, the first entries
        files = database_files(tmp_path / DATABASE_FILE)
        read_only(files, True)
        try:
            answers = {
                binding: SEND[binding](url, caller, f"h-{number}")
                for number, (binding, url) in enumerate(sorted(listed.items()))
            }
        finally:
            read_only(files, False)
        assert caller.send("run-1", "h-after").status_code == 200  # the database back
    expected = {"reason": "storage_unavailable", "retryAfterSeconds": "2"}
    assert {b: metadata for b, (_, _, metadata) in answers.items()} == dict.fromkeys(SEND, expected)
    assert {b: (name, http) for b, (name, http, _) in answers.items()} == {
        "JSONRPC": ("503", 503),
        "HTTP+JSON": ("UNAVAILABLE", 503),
        "GRPC": ("UNAVAILABLE", None),
    }
