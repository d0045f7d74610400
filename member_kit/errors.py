"""Every error a member on the kit raises on purpose, in one tree.

::

    MemberError
    ├── A2AError                  answered as a JSON-RPC error (code and reason from the table
    │   │                         in contracts.a2a_errors); its message is written for a person
    │   ├── ParseError                    -32700
    │   ├── InvalidRequest                -32600
    │   ├── MethodNotFound                -32601
    │   ├── InvalidParams                 -32602  (see invalid_params_from)
    │   │   └── IdempotencyKeyExpired     a retried send after the key's retention window
    │   ├── InternalError                 -32603
    │   │   ├── TaskStoreFull             every slot holds an unfinished task
    │   │   └── StorageFault              the database failed the call's work (reason
    │   │                                 storage_unavailable, HTTP 503, Retry-After)
    │   ├── TaskNotFound                  -32001
    │   ├── TaskNotCancelable             -32002
    │   ├── PushNotificationNotSupported  -32003
    │   ├── UnsupportedOperation          -32004
    │   ├── ContentTypeNotSupported       -32005
    │   ├── VersionNotSupported           -32009
    │   ├── DelegationRefused             -32090 / -32091 / -32092, answered with HTTP
    │   │                                 401 / 403 / 503 and a WWW-Authenticate challenge
    │   └── UpstreamFailure               -32006: the agent behind the guard gave no usable
    │                                     reply (upstream_unreachable, upstream_timeout,
    │                                     upstream_reply_too_large, upstream_reply_malformed)
    ├── SkillFailure              the skill could not do its work; the task ends FAILED with a
    │   │                         controlled error code, never as a JSON-RPC error
    │   └── ModelFailure          the risk model gave no usable reply; ``error_code`` is one of
    │                             model_unavailable, model_timeout, model_reply_malformed,
    │                             model_reply_too_large, model_incomplete, model_refused,
    │                             limit_reached
    ├── ConfigurationError        the service is configured in a way it must not run with
    │   │                         (no trusted issuer by accident, a weak operator token)
    │   └── OfAnotherMember       its storage is another member's (at start):
    │       ├── DatabaseOfAnotherMember       its database (database_of_another_member)
    │       └── DataDirectoryOfAnotherMember  its data directory, which holds its keys
    │                                         (data_directory_of_another_member)
    ├── ModelConfigInvalid        REMOTE_RISK_MODEL_* is incomplete or out of range (at start;
    │                             also a ValueError)
    ├── StorageUnavailable        the durable store cannot be opened or migrated (at start)
    ├── MemberNameInvalid         a member's name cannot name its metrics, logger and variables
    │                             (reason member_name_invalid; at start; also a ValueError)
    └── UpstreamCardInvalid       the guard cannot serve the upstream's card (at start; also
                                  a ValueError)

The shared layer's errors (:mod:`agent_cards.errors`) become these at the kit's boundary
(:func:`shared_translated`). Anything else that escapes a handler is a bug: the JSON-RPC
layer logs it and answers a generic -32603 so that no exception text reaches the wire.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from pydantic import ValidationError

from agent_cards.errors import MODEL_CONFIG_INVALID, SharedError, StorageFailure, translated_by
from agent_cards.storage.faults import RETRY_AFTER_SECONDS
from contracts import a2a_errors
from contracts.a2a_errors import RETRY_AFTER_METADATA, A2AErrorKind

# More than this many problems in one request are summarised rather than listed.
_MAX_LISTED_PROBLEMS = 5


class MemberError(Exception):
    """Base of every deliberate error in this package."""


class A2AError(MemberError):
    """An error the caller sees as a JSON-RPC error object."""

    default_kind: ClassVar[A2AErrorKind] = a2a_errors.INTERNAL_ERROR

    def __init__(
        self,
        message: str,
        *,
        kind: A2AErrorKind | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind or self.default_kind
        self.message = message
        self.metadata = metadata
        # The JSON-RPC binding answers every error with HTTP 200; only refusals differ.
        self.http_status = 200
        self.headers: Mapping[str, str] = {}

    @property
    def status_over_http(self) -> int:
        """The HTTP status where the binding's own status tells the error (HTTP+JSON, and
        gRPC's code follows it, :func:`~agent_cards.bindings.status.grpc_code`): the one
        this error set, else its kind's."""
        return self.http_status if self.http_status != 200 else self.kind.http_status

    def error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member: code, this message, ErrorInfo in ``data``."""
        return a2a_errors.error_object(self.kind, self.message, self.metadata)


class ParseError(A2AError):
    default_kind = a2a_errors.PARSE_ERROR


class InvalidRequest(A2AError):
    default_kind = a2a_errors.INVALID_REQUEST


class MethodNotFound(A2AError):
    default_kind = a2a_errors.METHOD_NOT_FOUND


class InvalidParams(A2AError):
    default_kind = a2a_errors.INVALID_PARAMS


class IdempotencyKeyExpired(InvalidParams):
    """A send names an idempotency key whose retention window has passed: its task may
    have been done already, so it is neither answered nor done again (reason
    ``idempotency_key_expired``); the caller must start the work under a new key."""

    REASON = "idempotency_key_expired"

    def __init__(self, retention_seconds: int) -> None:
        super().__init__(
            "params.message.metadata.idempotencyKey: the key was first used more than "
            f"{retention_seconds} s ago, beyond the retention window of this agent; its "
            "work is not done again, send it under a new key",
            metadata={"reason": self.REASON, "retentionSeconds": str(retention_seconds)},
        )


class InternalError(A2AError):
    default_kind = a2a_errors.INTERNAL_ERROR


class TaskStoreFull(InternalError):
    """No room for a new task: every stored task is still unfinished, none can be evicted."""

    def __init__(self, capacity: int) -> None:
        super().__init__(
            f"the agent is at capacity: all {capacity} task slots hold unfinished tasks; "
            "retry once some finish, or cancel one",
            metadata={"capacity": str(capacity)},
        )


class StorageFault(InternalError):
    """The database failed the call's work (a read-only or full disk, an I/O error, a lock
    not granted, a server gone): nothing of it was stored, and the same call is worth
    sending again once the database is back. Reason ``storage_unavailable`` in the
    ErrorInfo, with ``retryAfterSeconds``; over HTTP, status 503 and ``Retry-After``."""

    REASON = "storage_unavailable"

    def __init__(self) -> None:
        seconds = str(RETRY_AFTER_SECONDS)
        super().__init__(
            "the agent's database cannot be written now; nothing was stored, send again later",
            metadata={"reason": self.REASON, RETRY_AFTER_METADATA: seconds},
        )
        self.http_status = 503
        self.headers = {"Retry-After": seconds}


class TaskNotFound(A2AError):
    default_kind = a2a_errors.TASK_NOT_FOUND

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} was not found", metadata={"taskId": task_id})


class TaskNotCancelable(A2AError):
    default_kind = a2a_errors.TASK_NOT_CANCELABLE


class PushNotificationNotSupported(A2AError):
    default_kind = a2a_errors.PUSH_NOT_SUPPORTED


class UnsupportedOperation(A2AError):
    default_kind = a2a_errors.UNSUPPORTED_OPERATION


class ContentTypeNotSupported(A2AError):
    default_kind = a2a_errors.CONTENT_TYPE_NOT_SUPPORTED


class VersionNotSupported(A2AError):
    default_kind = a2a_errors.VERSION_NOT_SUPPORTED


_REFUSAL_KINDS = {
    401: a2a_errors.DELEGATION_UNAUTHENTICATED,
    403: a2a_errors.DELEGATION_PERMISSION_DENIED,
    503: a2a_errors.DELEGATION_UNAVAILABLE,
}


class DelegationRefused(A2AError):
    """A request refused by the delegation check: an HTTP status other than 200, a challenge,
    and a JSON-RPC error whose ErrorInfo metadata holds the stable ``reason`` code. With
    ``retry_after`` (seconds), when the same request is worth sending again: whole seconds,
    rounded up, in the metadata as ``retryAfterSeconds`` (every binding carries it) and,
    over HTTP, as ``Retry-After``."""

    def __init__(
        self,
        http_status: int,
        reason: str,
        message: str,
        challenge: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        metadata = {"reason": reason}
        headers = {"WWW-Authenticate": challenge} if challenge else {}
        if retry_after is not None:
            seconds = str(max(1, math.ceil(retry_after)))
            metadata[RETRY_AFTER_METADATA] = headers["Retry-After"] = seconds
        super().__init__(message, kind=_REFUSAL_KINDS[http_status], metadata=metadata)
        self.http_status = http_status
        self.reason = reason
        self.headers = headers


class UpstreamFailure(A2AError):
    """The agent behind the guard could not be reached in time or answered what is no
    A2A reply; ``reason`` is the stable code, also in the ErrorInfo metadata."""

    default_kind = a2a_errors.INVALID_AGENT_RESPONSE

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, metadata={"reason": reason})
        self.reason = reason


class SkillFailure(MemberError):
    """The skill tried and could not finish; ``error_code`` is a stable, documented token."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class ModelFailure(SkillFailure):
    """The risk model gave no usable reply: a transport or shape failure, a deadline, a cap.

    The skill catches it inside the task, which then ends FAILED with ``error_code``.
    """


class ConfigurationError(MemberError):
    """The service is configured in a way it must not run with."""


class OfAnotherMember(ConfigurationError):
    """Storage the settings name was first opened by another member: members never share
    a database nor a data directory (:mod:`member_kit.storage.owner`)."""

    reason: ClassVar[str]
    what: ClassVar[str]

    def __init__(self, owner: str, member: str) -> None:
        super().__init__(
            f"{self.reason}: the {self.what} belongs to member {owner!r}, not to"
            f" {member!r}; give each member its own data directory and database (or"
            " PostgreSQL schema, by search_path)"
        )
        self.owner = owner
        self.member = member


class DatabaseOfAnotherMember(OfAnotherMember):
    """The database holds another member's tables (its decision log, tasks, tokens)."""

    reason = "database_of_another_member"
    what = "database"


class DataDirectoryOfAnotherMember(OfAnotherMember):
    """The data directory holds another member's keys: one identity for two members."""

    reason = "data_directory_of_another_member"
    what = "data directory"


class ModelConfigInvalid(MemberError, ValueError):
    """The risk service's model configuration cannot be used."""


class StorageUnavailable(MemberError):
    """The durable store cannot be opened or migrated; the service must not start."""


class MemberNameInvalid(MemberError, ValueError):
    """A member's name cannot name its metrics, spans, logger and variables (see
    :mod:`member_kit.telemetry.names`); the app is not built."""

    reason = "member_name_invalid"


class UpstreamCardInvalid(MemberError, ValueError):
    """The guard cannot fetch the upstream's card, or cannot serve it as asked."""


def invalid_params_from(exc: ValidationError, root: str = "params") -> InvalidParams:
    """Turn a pydantic error into an InvalidParams whose message says what to fix.

    ``root`` prefixes each location, e.g. ``params.message.messageId: field required``.
    Input values are never echoed: they may be large or confidential.
    """
    problems = [_describe(root, error["loc"], error["msg"]) for error in exc.errors()]
    return InvalidParams(_join(problems))


def _describe(root: str, loc: Sequence[int | str], msg: str) -> str:
    return f"{location(root, loc)}: {_readable(msg)}"


def location(root: str, loc: Sequence[int | str]) -> str:
    """``("message", "parts", 0)`` under ``params`` reads ``params.message.parts[0]``."""
    text = root
    for step in loc:
        text += f"[{step}]" if isinstance(step, int) else f".{step}"
    return text


def _readable(msg: str) -> str:
    msg = msg.removeprefix("Value error, ")
    return msg[:1].lower() + msg[1:]


def _join(problems: list[str]) -> str:
    listed = "; ".join(problems[:_MAX_LISTED_PROBLEMS])
    hidden = len(problems) - _MAX_LISTED_PROBLEMS
    return f"{listed}; and {hidden} more" if hidden > 0 else listed


def from_shared(error: SharedError) -> MemberError:
    """The kit's error for one the shared layer (:mod:`agent_cards.errors`) raised."""
    if isinstance(error, StorageFailure):
        return StorageUnavailable(error.message)
    if error.reason == MODEL_CONFIG_INVALID:
        return ModelConfigInvalid(error.message)
    return ModelFailure(error.reason, error.message)


def shared_translated() -> AbstractContextManager[None]:
    """Raise the kit's error for any the shared layer raises inside."""
    return translated_by(from_shared)
