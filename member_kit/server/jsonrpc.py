"""A2A JSON-RPC 2.0 over HTTP, independent of any one specialist.

One POST goes through these steps, each of which can end it with an error body:

1. read the body, at most ``max_body_bytes`` (-32600 beyond that);
2. ``Content-Type`` must be ``application/json``, else -32005 ContentTypeNotSupported.
   JSON-RPC itself defines no error for this; we answer with A2A's content-type error
   because it names the problem exactly, it is what the A2A TCK expects, and the caller
   learns it sent the wrong media type rather than a "parse error" about valid bytes;
3. strict JSON (duplicate keys and NaN refused), else -32700;
4. the envelope: an object (no batches) with ``jsonrpc == "2.0"``, an ``id`` (A2A calls
   are all requests; a notification could never see its result), a non-empty ``method``
   and, if present, ``params`` as an object; anything else -32600. Members JSON-RPC does
   not define are ignored and counted (``remote_risk_ignored_fields_total``), as are
   members of ``params`` the operation's type does not define (step 8): the spec says
   unrecognised fields SHOULD be ignored;
5. ``A2A-Version`` must have major version 1; absent or empty means 0.3, so -32009;
6. the method must be one the handler offers, else -32601;
7. ``authorize(request, method, params)`` returns the :class:`CallContext` the operation
   runs under (the hook where delegation-token checks go). It may raise an
   :class:`~member_kit.errors.A2AError` or a Starlette ``HTTPException`` (e.g. a 401),
   which is passed through unchanged. A :class:`~member_kit.errors.DelegationRefused`
   is a JSON-RPC error body sent with its own HTTP status (401, 403 or 503) and challenge;
8. ``params`` are validated into the operation's pydantic type, else -32602 with a
   message naming each offending field;
9. the operation runs. An :class:`~member_kit.errors.A2AError` becomes its error body;
   anything else is logged here and answered as a generic -32603.

A :class:`StreamingOperation` (``SendStreamingMessage``, ``SubscribeToTask``) answers with
Server-Sent Events instead: its coroutine makes every check first, so a refusal is still
a plain JSON error body, then returns the events. Each SSE ``data:`` line is a full
JSON-RPC response with the request's id whose ``result`` is one event; an error after the
stream has started is sent as one last event holding a JSON-RPC error. The stream closes
when the events end; a caller that goes away closes only its own stream.

Every JSON-RPC answer, error or not, is HTTP 200 as in the A2A reference SDK; the
JSON-RPC error code carries the meaning. The one exception is a refused delegation token:
HTTP clients, proxies and RFC 6750 expect 401/403 there, so it keeps its status.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from agent_cards.bindings.lenient import known_part
from contracts import strict_json
from contracts.grant import Budget
from contracts.strict_json import StrictJSONError
from contracts.wire import PROTOCOL_VERSION, VERSION_HEADER, JSONObject, RequestId, to_wire
from member_kit import errors
from member_kit.server.streams import KEEP_ALIVE, kept_alive
from member_kit.storage.faults import is_storage_fault
from member_kit.telemetry.observed import Telemetry
from member_kit.trust.denials import DelegationDenied

logger = logging.getLogger(__name__)

ANONYMOUS_OWNER = "anonymous"
JSON_MEDIA_TYPE = "application/json"
SSE_MEDIA_TYPE = "text/event-stream"
# An absent or empty A2A-Version header means the caller speaks 0.3 (A2A service parameters).
IMPLIED_VERSION = "0.3"
BINDING = "jsonrpc"
_ENVELOPE_MEMBERS = frozenset({"jsonrpc", "id", "method", "params"})

ParamsT = TypeVar("ParamsT", bound=BaseModel)


class TaskClaim(Protocol):
    """Claims the caller's credential for the one task it may create (call it); raises
    the refusal if it did already. :meth:`again`: the same claim, made again after a
    write that held it failed with its outcome unknown, where a credential found used may
    have been used by that very write (refused as undecided, never as a replay)."""

    def __call__(self) -> None: ...

    def again(self) -> None: ...


@dataclass(frozen=True)
class CallContext:
    """Who is calling and about which request; every operation receives one.

    ``owner`` scopes tasks: a caller only ever sees tasks created under the same owner.
    ``request_id`` is filled in by the endpoint after authorization.
    ``claim_task_creation``, when set, must be called right before a task is created: it
    records that the caller's credential created a task and raises (e.g. a replayed
    delegation token) if it already did. ``lease_expires_at`` is the verified delegation
    token's ``exp`` (seconds since the epoch), when there is one: work for this request
    must be done before it, within the token's ``budget``.
    """

    owner: str
    request_id: RequestId = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    claim_task_creation: TaskClaim | None = field(default=None, repr=False)
    lease_expires_at: int | None = None
    # The verified grant's budget claim: the model requests (and tokens) the work may spend.
    budget: Budget | None = None
    # What the caller's credential binds (its jti and req_digest), kept with a task it
    # opens so that the task's receipt can name them.
    bound: Mapping[str, Any] | None = None
    # The verified delegation token itself, held for the task's work so that its skill
    # can sub-delegate (member_kit.trust.chain); never stored, logged or shown.
    held_token: str | None = field(default=None, repr=False)

    def for_request(self, request_id: RequestId) -> CallContext:
        """This context for the request ``request_id``: a copy (an authorizer may hand one
        context to many requests) with that member changed, its other members shared as
        they are, made without the pass of ``dataclasses.replace`` over every field."""
        copied: CallContext = object.__new__(type(self))
        copied.__dict__.update(self.__dict__, request_id=request_id)
        return copied


Authorize = Callable[[Request, str, JSONObject], CallContext | Awaitable[CallContext]]


def anonymous(request: Request, method: str, params: JSONObject) -> CallContext:
    """The default authorizer: every caller is the same anonymous owner."""
    return CallContext(owner=ANONYMOUS_OWNER, headers=dict(request.headers))


@dataclass(frozen=True)
class Operation(Generic[ParamsT]):
    """One JSON-RPC method: the type its params must have and the coroutine that serves it."""

    params_type: type[ParamsT]
    call: Callable[[ParamsT, CallContext], Awaitable[BaseModel]]


@dataclass(frozen=True)
class StreamingOperation(Generic[ParamsT]):
    """A JSON-RPC method answered over SSE: awaiting ``call`` makes every check (errors
    raised there are plain JSON), then the returned iterator yields the events."""

    params_type: type[ParamsT]
    call: Callable[[ParamsT, CallContext], Awaitable[AsyncIterator[BaseModel]]]


AnyOperation = Operation[Any] | StreamingOperation[Any]


class OperationTable(Protocol):
    """A handler object: maps PascalCase A2A method names to operations."""

    def operations(self) -> Mapping[str, AnyOperation]: ...


@dataclass(frozen=True)
class Envelope:
    request_id: RequestId
    method: str
    params: JSONObject


class JSONRPCEndpoint:
    """Serves one operation table; route ``endpoint.handle`` (``async (Request) -> Response``).
    What it observes goes to ``telemetry``, its app's (a part of its own when alone)."""

    def __init__(
        self,
        handler: OperationTable,
        *,
        authorize: Authorize = anonymous,
        max_body_bytes: int = 1_000_000,
        record_body: Callable[[bytes], None] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        if max_body_bytes < 1:
            raise ValueError("max_body_bytes must be positive")
        self.telemetry = telemetry or Telemetry.standalone()
        self.dispatcher = Dispatcher(handler, authorize, self.telemetry)
        self._max_body_bytes = max_body_bytes
        self._record_body = record_body

    async def handle(self, request: Request) -> Response:
        return await self.answer(request)

    async def answer(self, request: Request, read: tuple[bytes, Any] | None = None) -> Response:
        """The answer to ``request``; ``read`` is its body and that body's strict parse
        when the caller already has them (the fast path of a blocking send)."""
        request_id: RequestId = None
        try:
            document = await self._document(request, read)
            request_id = _usable_id(document)
            envelope = parse_envelope(document, self.telemetry)
            self.telemetry.note(a2a_method=envelope.method)
            check_version(request.headers.get(VERSION_HEADER))
            result = await self._dispatch(request, envelope)
            if not isinstance(result, BaseModel):
                return _event_stream(request_id, result)
            return _result_response(request_id, result)
        except errors.A2AError as error:
            self.telemetry.note(a2a_error=error.kind.reason)
            logger.info("JSON-RPC %s answered %s: %s", request_id, error.kind.code, error.message)
            return _error_response(request_id, error)
        except HTTPException:
            raise
        except Exception:
            logger.exception("JSON-RPC request %r failed unexpectedly", request_id)
            return _error_response(request_id, errors.InternalError("internal error"))

    async def _document(self, request: Request, read: tuple[bytes, Any] | None) -> Any:
        body = await self._read_body(request) if read is None else read[0]
        if self._record_body is not None:
            self._record_body(body)
        check_content_type(request.headers.get("content-type"))
        if read is not None:
            return read[1]
        try:
            return strict_json.loads(body)
        except StrictJSONError as exc:
            raise errors.ParseError(f"the request body is not strict JSON: {exc}") from None

    async def _read_body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_body_bytes:
            raise self._too_large()
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self._max_body_bytes:
                raise self._too_large()
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self) -> errors.InvalidRequest:
        return errors.InvalidRequest(f"the request body exceeds {self._max_body_bytes} bytes")

    async def _dispatch(
        self, request: Request, envelope: Envelope
    ) -> BaseModel | AsyncIterator[BaseModel]:
        return await self.dispatcher.call(
            request, envelope.method, envelope.params, BINDING, envelope.request_id
        )


class Dispatcher:
    """The one way a call reaches an operation, whatever binding carried it (JSON-RPC,
    HTTP+JSON, gRPC): the method is looked up, ``authorize`` decides the caller (every
    token and trust check), the params are parsed (unknown members ignored and counted),
    and the operation runs. Every binding observes through its ``telemetry``."""

    def __init__(
        self,
        handler: OperationTable,
        authorize: Authorize = anonymous,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._operations = dict(handler.operations())
        self._authorize = authorize
        self.telemetry = telemetry or Telemetry.standalone()

    def field_types(self, method: str) -> dict[str, type]:
        """The scalar type (int, bool or str) of each top-level param of ``method``, by its
        wire name: how a binding without JSON bodies (a query string) types its values."""
        operation = self._operations.get(method)
        if operation is None:
            return {}
        types: dict[str, type] = {}
        for name, info in operation.params_type.model_fields.items():
            members = {
                getattr(a, "__origin__", a) for a in getattr(info.annotation, "__args__", ())
            }
            members.add(info.annotation)
            scalar = next((t for t in (bool, int) if t in members), str)
            types[info.alias or name] = scalar
        return types

    async def call(
        self,
        request: Request,
        method: str,
        params: JSONObject,
        binding: str,
        request_id: RequestId = None,
    ) -> BaseModel | AsyncIterator[BaseModel]:
        """The operation's result: a model, or the events of a streaming operation. When
        the database fails its work (the authorization's writes included), the answer is
        :class:`~member_kit.errors.StorageFault`, on every binding."""
        operation = self._operations.get(method)
        if operation is None:
            raise errors.MethodNotFound(f"method {method!r} is not offered by this agent")
        try:
            decided = self._authorize(request, method, params)
            context = await decided if inspect.isawaitable(decided) else decided
            context = context.for_request(request_id)
            parsed = parse_params(operation, params, binding, self.telemetry)
            return await operation.call(parsed, context)
        except Exception as error:
            if not _failed_in_storage(error):
                raise
            logger.warning("the database failed the work of %s", method, exc_info=True)
            raise errors.StorageFault() from error


def _failed_in_storage(error: Exception) -> bool:
    """Whether an operation failed because the database did: a deliberate error (one of
    the kit's, a refusal) is answered as itself, even when a storage fault caused it."""
    return not isinstance(error, errors.MemberError | DelegationDenied) and is_storage_fault(error)


def parse_params(
    operation: AnyOperation, params: JSONObject, binding: str, telemetry: Telemetry
) -> BaseModel:
    """``params`` as the operation's type; members it does not define are ignored and
    counted (in ``telemetry``), anything else wrong is -32602 naming each offending field."""
    known, ignored = known_part(operation.params_type, params)
    telemetry.ignored_fields(binding, ignored)
    try:
        return operation.params_type.model_validate(known)
    except ValidationError as exc:
        raise errors.invalid_params_from(exc) from None


def check_content_type(content_type: str | None) -> None:
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != JSON_MEDIA_TYPE:
        shown = media_type or "none"
        raise errors.ContentTypeNotSupported(
            f"Content-Type {shown} is not supported; send {JSON_MEDIA_TYPE}"
        )


def check_version(header: str | None) -> None:
    """Accept any 1.x version; the header's absence means the caller speaks 0.3."""
    requested = (header or "").strip() or IMPLIED_VERSION
    if requested.split(".", 1)[0] != PROTOCOL_VERSION.split(".", 1)[0]:
        raise errors.VersionNotSupported(
            f"A2A-Version {requested} is not supported; send {VERSION_HEADER}: {PROTOCOL_VERSION}",
            metadata={"requestedVersion": requested, "supportedVersions": PROTOCOL_VERSION},
        )


def parse_envelope(document: Any, telemetry: Telemetry) -> Envelope:
    """Check the JSON-RPC 2.0 request object and split it into its parts (members it does
    not define are ignored and counted in ``telemetry``)."""
    if isinstance(document, list):
        raise errors.InvalidRequest("batch requests are not supported")
    if not isinstance(document, dict):
        raise errors.InvalidRequest("a JSON-RPC request must be a JSON object")
    telemetry.ignored_fields(BINDING, sorted(set(document) - _ENVELOPE_MEMBERS))
    if document.get("jsonrpc") != "2.0":
        raise errors.InvalidRequest('jsonrpc must be exactly "2.0"')
    if "id" not in document:
        raise errors.InvalidRequest("id is required: every A2A call is a request")
    if _usable_id(document) is None and document["id"] is not None:
        raise errors.InvalidRequest("id must be a string, an integer or null")
    method = document.get("method")
    if not isinstance(method, str) or not method:
        raise errors.InvalidRequest("method must be a non-empty string")
    params = document.get("params", {})
    if not isinstance(params, dict):
        raise errors.InvalidRequest("params must be a JSON object")
    return Envelope(request_id=document["id"], method=method, params=params)


def _usable_id(document: Any) -> RequestId:
    """The request's id if it is one a response may echo (string or integer), else None."""
    if not isinstance(document, dict):
        return None
    value = document.get("id")
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _error_response(request_id: RequestId, error: errors.A2AError) -> Response:
    body = {"jsonrpc": "2.0", "id": request_id, "error": error.error_object()}
    return _respond(body, error.http_status, error.headers)


def result_body(request_id: RequestId, result: BaseModel) -> bytes:
    """The success response's JSON, the result serialised in one pass by pydantic: the
    same document as ``strict_json.dumps`` of its :func:`to_wire` (which, like pydantic's
    JSON output, already turns a non-finite float into null), at a fraction of the cost."""
    return b"".join(
        (
            b'{"jsonrpc":"2.0","id":',
            strict_json.dumps(request_id),
            b',"result":',
            result.model_dump_json(by_alias=True, exclude_none=True).encode(),
            b"}",
        )
    )


def _result_response(request_id: RequestId, result: BaseModel) -> Response:
    return Response(result_body(request_id, result), media_type=JSON_MEDIA_TYPE)


def _respond(
    body: dict[str, Any], status_code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        strict_json.dumps(body),
        status_code=status_code,
        headers=dict(headers or {}),
        media_type=JSON_MEDIA_TYPE,
    )


def _event_stream(request_id: RequestId, events: AsyncIterator[BaseModel]) -> StreamingResponse:
    return StreamingResponse(
        _sse_lines(request_id, events),
        media_type=SSE_MEDIA_TYPE,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _sse_lines(
    request_id: RequestId, events: AsyncIterator[BaseModel]
) -> AsyncIterator[bytes]:
    """Each event as one SSE ``data:`` line holding a JSON-RPC response, a comment line
    while none comes (:func:`~member_kit.server.streams.kept_alive`); an error ends it."""
    stream = kept_alive(events)
    try:
        async for event in stream:
            if event is None:
                yield KEEP_ALIVE
                continue
            yield sse_data({"jsonrpc": "2.0", "id": request_id, "result": to_wire(event)})
    except errors.A2AError as error:
        logger.info("stream %s ended with %s: %s", request_id, error.kind.code, error.message)
        yield sse_data({"jsonrpc": "2.0", "id": request_id, "error": error.error_object()})
    except Exception:
        logger.exception("stream %r failed unexpectedly", request_id)
        internal = errors.InternalError("internal error")
        yield sse_data({"jsonrpc": "2.0", "id": request_id, "error": internal.error_object()})
    finally:
        await stream.aclose()  # and the events with it


def sse_data(body: dict[str, Any]) -> bytes:
    """One SSE event: a single ``data:`` line (strict JSON has no raw newlines)."""
    return b"data: " + strict_json.dumps(body) + b"\n\n"
