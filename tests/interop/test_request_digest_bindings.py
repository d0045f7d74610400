"""One request digest for one message, whichever binding carried it.

A client mints (or is given) a token whose ``req_digest`` binds the message it sends as
JSON, with members ProtoJSON leaves out when they hold their default: empty lists, empty
strings. Over gRPC the same message arrives without them (protobuf cannot tell an empty
list from none); remote_risk must compute the digest the client computed, on every
binding, so the same valid send is accepted on JSON-RPC, HTTP+JSON and gRPC alike, and a
send that alters what the digest covers is refused on each with
``request_digest_mismatch``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from contracts.request_digest import request_digest
from remote_risk.settings import REST_PATH
from tests import tokens
from tests.remote_risk.conftest import risk_input
from tests.remote_risk.delegated import ISSUER, SCOPE, SKILL, Caller, delegated_service
from tests.servers import free_port
from tests.tokens import header

BINDINGS = ("jsonrpc", "http_json", "grpc")


def message(handoff_id: str) -> dict[str, Any]:
    """A send as JSON with every covered member ProtoJSON may omit, at its default."""
    return {
        "messageId": f"m-{handoff_id}",
        "role": "ROLE_USER",
        "parts": [{"data": risk_input(), "mediaType": "application/json", "filename": ""}],
        "extensions": [],
        "referenceTaskIds": [],
        "metadata": {
            "handoffId": handoff_id,
            "attempt": 1,
            "skillId": SKILL,
            "idempotencyKey": f"run-digest:{handoff_id}",
        },
    }


def token_for(caller: Caller, bound: dict[str, Any], handoff_id: str) -> str:
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=caller.audience,
        scope=SCOPE,
        handoff_id=handoff_id,
        jti=f"jti-{handoff_id}",
    )
    return tokens.forge(header(), {**claims, "req_digest": request_digest(bound)})


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[Caller, Any]]:
    with delegated_service(grpc_port=free_port()) as running:
        yield running


def _headers(token: str) -> dict[str, str]:
    return {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}


def send(service: tuple[Caller, Any], binding: str, sent: dict[str, Any], token: str) -> str:
    """The state of the task the send opened, or the refusal's reason code."""
    caller, app = service
    if binding == "grpc":
        return _send_grpc(app.state.settings.grpc_port, sent, token)
    if binding == "jsonrpc":
        response = caller.call("SendMessage", {"message": sent}, token)
        body = response.json()
        if "error" in body:
            return str(body["error"]["data"][0]["metadata"]["reason"])
        return str(body["result"]["task"]["status"]["state"])
    url = caller.base_url + REST_PATH + "/message:send"
    response = httpx.post(url, json={"message": sent}, headers=_headers(token), timeout=10)
    body = response.json()
    if "error" in body:
        return str(body["error"]["details"][0]["metadata"]["reason"])
    return str(body["task"]["status"]["state"])


def _send_grpc(port: int, sent: dict[str, Any], token: str) -> str:
    request = json_format.ParseDict({"message": sent}, a2a_pb2.SendMessageRequest())
    metadata = [(key.lower(), value) for key, value in _headers(token).items()]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        try:
            answer = stub.SendMessage(request, metadata=metadata, timeout=10)
        except grpc.RpcError as error:
            return _grpc_reason(error)
    return a2a_pb2.TaskState.Name(answer.task.status.state)


def _grpc_reason(error: Any) -> str:
    trailers = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return str(info.metadata["reason"])


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_send_with_omissible_members_is_accepted_on_every_binding(
    service: tuple[Caller, Any], binding: str
) -> None:
    """The token binds the JSON the client sent (empty lists and strings included); the
    service reads the same digest off every binding and completes the task."""
    handoff_id = f"handoff-empty-{binding}"
    sent = message(handoff_id)
    assert send(service, binding, sent, token_for(service[0], sent, handoff_id)) == (
        "TASK_STATE_COMPLETED"
    )


@pytest.mark.parametrize("binding", BINDINGS)
def test_the_same_send_bound_without_the_defaults_is_accepted_too(
    service: tuple[Caller, Any], binding: str
) -> None:
    """A token minted over the message without its empty members (as a gRPC client, which
    cannot send them, would mint it) fits the message sent with them: one message, one
    digest."""
    handoff_id = f"handoff-bare-{binding}"
    sent = message(handoff_id)
    bare = {key: value for key, value in sent.items() if value != []}
    bare["parts"] = [{"data": risk_input(), "mediaType": "application/json"}]
    assert send(service, binding, sent, token_for(service[0], bare, handoff_id)) == (
        "TASK_STATE_COMPLETED"
    )


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_send_altered_under_the_token_is_refused_on_every_binding(
    service: tuple[Caller, Any], binding: str
) -> None:
    """Normalising the defaults does not loosen the binding: another reference or another
    extension under the token is refused on each binding."""
    handoff_id = f"handoff-altered-{binding}"
    sent = message(handoff_id)
    token = token_for(service[0], sent, handoff_id)
    altered = copy.deepcopy(sent)
    altered["extensions"] = ["urn:example:approve-everything"]
    assert send(service, binding, altered, token) == "request_digest_mismatch"
