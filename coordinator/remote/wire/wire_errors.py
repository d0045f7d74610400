"""A remote's error, whichever binding carried it, as one :class:`RemoteA2AError`.

JSON-RPC carries the A2A code and ``ErrorInfo`` in ``error.data``; HTTP+JSON a
``google.rpc.Status`` body (``{"error": {"code", "status", "message", "details"}}``); gRPC
the status code and the same ``Status`` in its trailers. The A2A error is named by the
``ErrorInfo`` reason (the spec's table, :mod:`contracts.a2a_errors`, through the servers'
own :mod:`agent_cards.bindings.status`), so each maps back to the code the JSON-RPC
binding would have answered; a status without an ``ErrorInfo`` maps only where that
table gives its canonical code to one A2A error alone (``NOT_FOUND`` is TaskNotFound,
``FAILED_PRECONDITION`` could be six errors and is refused as ``error_info_missing``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from agent_cards.bindings.status import GRPC_CODES, kind_of_reason
from contracts.a2a_errors import A2AErrorKind, metadata_of, reason_of
from coordinator.errors import ProtocolError, RemoteA2AError, TransportError

# google.rpc.Code names the table gives to exactly one A2A error.
_NAMED = Counter(GRPC_CODES.values())
BY_STATUS_NAME: dict[str, A2AErrorKind] = {
    name: kind
    for reason, name in GRPC_CODES.items()
    if _NAMED[name] == 1 and (kind := kind_of_reason(reason)) is not None
}
MAX_MESSAGE = 500


def remote_error(status_name: str, message: str, details: Any, where: str) -> RemoteA2AError:
    """The error a ``google.rpc.Status`` (status name, message, details) stands for."""
    reason = reason_of(details)
    kind = kind_of_reason(reason) or BY_STATUS_NAME.get(status_name)
    if kind is None:
        raise ProtocolError(
            f"{where}: error {status_name or 'without a status'} names no A2A error",
            "error_info_missing",
        )
    return RemoteA2AError(kind.code, message[:MAX_MESSAGE], reason, metadata_of(details))


def from_http_status_body(status: int, document: Any, where: str) -> RemoteA2AError:
    """The error an HTTP+JSON error response carries; a body that is not a
    ``google.rpc.Status`` is a transport failure with its HTTP status."""
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        raise TransportError(
            f"{where}: HTTP {status} without a google.rpc.Status body", "http_status"
        )
    name = error.get("status")
    message = error.get("message")
    return remote_error(
        name if isinstance(name, str) else "",
        message if isinstance(message, str) else "",
        error.get("details"),
        where,
    )
