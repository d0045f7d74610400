"""The JSON-RPC 2.0 envelope of A2A's JSON-RPC binding: a response's result, or its error.

A response is read strictly: its error is raised as
:class:`~coordinator.errors.RemoteA2AError`, an answer to another request's id as
:class:`~coordinator.errors.ProtocolError`; an event of a stream is one such response whose
result is a ``StreamResponse``.
"""

from __future__ import annotations

from typing import Any

from contracts import strict_json
from contracts.a2a_errors import metadata_of, reason_of
from contracts.wire import JSONRPCResponse, StreamResponse
from coordinator.errors import ProtocolError, RemoteA2AError


def stream_result(data: bytes, request_id: int, method: str, endpoint: str) -> StreamResponse:
    document = strict_json.loads(data)
    if not isinstance(document, dict):
        raise ProtocolError(f"{method} to {endpoint}: an event is not a JSON object", "not_jsonrpc")
    return StreamResponse.model_validate(jsonrpc_result(document, request_id, method, endpoint))


def jsonrpc_result(document: dict[str, Any], request_id: int, method: str, endpoint: str) -> Any:
    """The ``result`` of a JSON-RPC response to ``request_id``; an error raises
    :class:`RemoteA2AError`, another id :class:`ProtocolError`."""
    response = JSONRPCResponse.model_validate(document)
    if response.error is not None:
        error = response.error
        raise RemoteA2AError(
            error.code, error.message, reason_of(error.data), metadata_of(error.data)
        )
    if response.id != request_id:
        raise ProtocolError(f"{method} to {endpoint}: response id mismatch", "id_mismatch")
    return response.result
