"""A2A errors as ``google.rpc.Status``: the HTTP+JSON error body and the gRPC status.

One table (A2A v1.0 section 5.4) gives each error kind of :mod:`contracts.a2a_errors` its
canonical gRPC code; the HTTP+JSON binding names the same code in its body's ``status``
and answers with the kind's HTTP status. An answer given as HTTP 503 (the service cannot
do the work now) is ``UNAVAILABLE`` on both, whatever its kind. Both bindings carry the
kind's ``ErrorInfo`` (reason, domain, metadata) in ``details``, and clients map back
through the same table.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from contracts import a2a_errors
from contracts.a2a_errors import A2AErrorKind

__all__ = ["GRPC_CODES", "grpc_code", "kind_of_reason", "status_json", "status_proto"]

# canonical gRPC codes (google.rpc.Code) by name
_CODES = {
    "OK": 0,
    "INVALID_ARGUMENT": 3,
    "NOT_FOUND": 5,
    "PERMISSION_DENIED": 7,
    "FAILED_PRECONDITION": 9,
    "UNIMPLEMENTED": 12,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "UNAUTHENTICATED": 16,
}
GRPC_CODES: dict[str, str] = {
    a2a_errors.PARSE_ERROR.reason: "INVALID_ARGUMENT",
    a2a_errors.INVALID_REQUEST.reason: "INVALID_ARGUMENT",
    a2a_errors.METHOD_NOT_FOUND.reason: "UNIMPLEMENTED",
    a2a_errors.INVALID_PARAMS.reason: "INVALID_ARGUMENT",
    a2a_errors.INTERNAL_ERROR.reason: "INTERNAL",
    a2a_errors.TASK_NOT_FOUND.reason: "NOT_FOUND",
    a2a_errors.TASK_NOT_CANCELABLE.reason: "FAILED_PRECONDITION",
    a2a_errors.PUSH_NOT_SUPPORTED.reason: "FAILED_PRECONDITION",
    a2a_errors.UNSUPPORTED_OPERATION.reason: "FAILED_PRECONDITION",
    a2a_errors.CONTENT_TYPE_NOT_SUPPORTED.reason: "INVALID_ARGUMENT",
    a2a_errors.INVALID_AGENT_RESPONSE.reason: "INTERNAL",
    a2a_errors.EXTENDED_CARD_NOT_CONFIGURED.reason: "FAILED_PRECONDITION",
    a2a_errors.EXTENSION_SUPPORT_REQUIRED.reason: "FAILED_PRECONDITION",
    a2a_errors.VERSION_NOT_SUPPORTED.reason: "FAILED_PRECONDITION",
    a2a_errors.DELEGATION_UNAUTHENTICATED.reason: "UNAUTHENTICATED",
    a2a_errors.DELEGATION_PERMISSION_DENIED.reason: "PERMISSION_DENIED",
    a2a_errors.DELEGATION_UNAVAILABLE.reason: "UNAVAILABLE",
}
# The HTTP status of an answer that says "not now": gRPC's UNAVAILABLE.
UNAVAILABLE_HTTP = 503
_BY_REASON = {kind.reason: kind for kind in (*a2a_errors.ALL_KINDS, *a2a_errors.PROJECT_KINDS)}


def grpc_code(kind: A2AErrorKind, http_status: int | None = None) -> tuple[str, int]:
    """The canonical gRPC code of an answer of ``kind``: its name and number. An answer
    given as HTTP 503 (the service cannot do the work now, its database down, say) is
    ``UNAVAILABLE`` whatever its kind: the code every binding's clients read as worth
    sending again, as they read the 503."""
    if http_status == UNAVAILABLE_HTTP:
        return "UNAVAILABLE", _CODES["UNAVAILABLE"]
    name = GRPC_CODES.get(kind.reason, "INTERNAL")
    return name, _CODES[name]


def kind_of_reason(reason: str | None) -> A2AErrorKind | None:
    """The error kind an ``ErrorInfo.reason`` names, if it is one of ours."""
    return _BY_REASON.get(reason or "")


def status_json(
    kind: A2AErrorKind,
    message: str,
    metadata: dict[str, str] | None = None,
    http_status: int | None = None,
) -> dict[str, Any]:
    """The HTTP+JSON error body: ``{"error": google.rpc.Status as ProtoJSON}``, for an
    answer with ``http_status`` (the kind's own unless given)."""
    code = http_status or kind.http_status
    name, _ = grpc_code(kind, code)
    details = [a2a_errors.error_info(kind, metadata)]
    return {"error": {"code": code, "status": name, "message": message, "details": details}}


def status_proto(
    kind: A2AErrorKind,
    message: str,
    metadata: dict[str, str] | None = None,
    http_status: int | None = None,
) -> status_pb2.Status:
    """The gRPC ``google.rpc.Status`` (sent as ``grpc-status-details-bin``) of an answer
    that HTTP would give as ``http_status``."""
    info = a2a_errors.error_info(kind, metadata)
    detail = error_details_pb2.ErrorInfo(
        reason=info["reason"], domain=info["domain"], metadata=info.get("metadata", {})
    )
    packed = any_pb2.Any()
    packed.Pack(detail)
    code = grpc_code(kind, http_status)[1]
    return status_pb2.Status(code=code, message=message, details=[packed])
