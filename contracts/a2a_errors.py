"""The A2A v1.0 error table (spec section 5.4) in one declarative place.

Each row gives the JSON-RPC code, the ``google.rpc.ErrorInfo`` reason, and the HTTP status
used by the HTTP+JSON binding. Servers build error bodies from this table and clients map
codes back through it, so the two directions cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
ERROR_DOMAIN = "a2a-protocol.org"


@dataclass(frozen=True)
class A2AErrorKind:
    name: str
    code: int
    reason: str
    http_status: int


PARSE_ERROR = A2AErrorKind("JSONParseError", -32700, "PARSE_ERROR", 400)
INVALID_REQUEST = A2AErrorKind("InvalidRequestError", -32600, "INVALID_REQUEST", 400)
METHOD_NOT_FOUND = A2AErrorKind("MethodNotFoundError", -32601, "METHOD_NOT_FOUND", 404)
INVALID_PARAMS = A2AErrorKind("InvalidParamsError", -32602, "INVALID_PARAMS", 400)
INTERNAL_ERROR = A2AErrorKind("InternalError", -32603, "INTERNAL_ERROR", 500)
TASK_NOT_FOUND = A2AErrorKind("TaskNotFoundError", -32001, "TASK_NOT_FOUND", 404)
TASK_NOT_CANCELABLE = A2AErrorKind("TaskNotCancelableError", -32002, "TASK_NOT_CANCELABLE", 400)
PUSH_NOT_SUPPORTED = A2AErrorKind(
    "PushNotificationNotSupportedError", -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", 400
)
UNSUPPORTED_OPERATION = A2AErrorKind(
    "UnsupportedOperationError", -32004, "UNSUPPORTED_OPERATION", 400
)
CONTENT_TYPE_NOT_SUPPORTED = A2AErrorKind(
    "ContentTypeNotSupportedError", -32005, "CONTENT_TYPE_NOT_SUPPORTED", 400
)
INVALID_AGENT_RESPONSE = A2AErrorKind(
    "InvalidAgentResponseError", -32006, "INVALID_AGENT_RESPONSE", 500
)
EXTENDED_CARD_NOT_CONFIGURED = A2AErrorKind(
    "ExtendedAgentCardNotConfiguredError", -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", 400
)
EXTENSION_SUPPORT_REQUIRED = A2AErrorKind(
    "ExtensionSupportRequiredError", -32008, "EXTENSION_SUPPORT_REQUIRED", 400
)
VERSION_NOT_SUPPORTED = A2AErrorKind(
    "VersionNotSupportedError", -32009, "VERSION_NOT_SUPPORTED", 400
)

ALL_KINDS = (
    PARSE_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    INVALID_PARAMS,
    INTERNAL_ERROR,
    TASK_NOT_FOUND,
    TASK_NOT_CANCELABLE,
    PUSH_NOT_SUPPORTED,
    UNSUPPORTED_OPERATION,
    CONTENT_TYPE_NOT_SUPPORTED,
    INVALID_AGENT_RESPONSE,
    EXTENDED_CARD_NOT_CONFIGURED,
    EXTENSION_SUPPORT_REQUIRED,
    VERSION_NOT_SUPPORTED,
)

# Project extensions, not part of A2A: a delegation token was refused. A2A defines no
# authentication error, so these take codes from the far end of the implementation-defined
# server range (-32099..-32000), away from the codes A2A numbers upwards from -32001. The
# stable refusal reason (e.g. ``token_expired``) is in ``error.data[0].metadata.reason``.
PROJECT_ERROR_DOMAIN = "a2a-federation"
DELEGATION_UNAUTHENTICATED = A2AErrorKind(
    "DelegationUnauthenticatedError", -32090, "UNAUTHENTICATED", 401
)
DELEGATION_PERMISSION_DENIED = A2AErrorKind(
    "DelegationPermissionDeniedError", -32091, "PERMISSION_DENIED", 403
)
DELEGATION_UNAVAILABLE = A2AErrorKind("DelegationUnavailableError", -32092, "UNAVAILABLE", 503)
PROJECT_KINDS = (DELEGATION_UNAUTHENTICATED, DELEGATION_PERMISSION_DENIED, DELEGATION_UNAVAILABLE)
# Beside ``reason`` in a refusal's metadata, when the refusing side knows it: the whole
# seconds after which the same request is worth sending again (e.g. ``kid_unknown`` while
# the issuer's keys are fetched again). HTTP answers also carry it as ``Retry-After``.
RETRY_AFTER_METADATA = "retryAfterSeconds"

BY_CODE = {kind.code: kind for kind in (*ALL_KINDS, *PROJECT_KINDS)}


def error_info(kind: A2AErrorKind, metadata: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``google.rpc.ErrorInfo`` detail that A2A errors carry in ``error.data``."""
    domain = PROJECT_ERROR_DOMAIN if kind in PROJECT_KINDS else ERROR_DOMAIN
    info: dict[str, Any] = {"@type": ERROR_INFO_TYPE, "reason": kind.reason, "domain": domain}
    if metadata:
        info["metadata"] = metadata
    return info


def error_object(
    kind: A2AErrorKind, message: str, metadata: dict[str, str] | None = None
) -> dict[str, Any]:
    """The JSON-RPC ``error`` member for ``kind``: code, a readable message, ErrorInfo data."""
    return {"code": kind.code, "message": message, "data": [error_info(kind, metadata)]}


def reason_of(error_data: Any) -> str | None:
    """The ErrorInfo reason inside a JSON-RPC ``error.data`` array, if there is one."""
    reason = _error_info_of(error_data).get("reason")
    return reason if isinstance(reason, str) else None


def metadata_of(error_data: Any) -> dict[str, str]:
    """The ErrorInfo metadata inside ``error.data`` (or a ``google.rpc.Status``'s
    ``details``): its string entries; empty if there is none."""
    metadata = _error_info_of(error_data).get("metadata")
    if not isinstance(metadata, dict):
        return {}
    return {k: v for k, v in metadata.items() if isinstance(k, str) and isinstance(v, str)}


def _error_info_of(error_data: Any) -> dict[str, Any]:
    """The first ErrorInfo of a list of details; empty if there is none."""
    if not isinstance(error_data, list):
        return {}
    for detail in error_data:
        if isinstance(detail, dict) and detail.get("@type") == ERROR_INFO_TYPE:
            return detail
    return {}
