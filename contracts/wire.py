"""A2A v1.0 wire objects (``specification/a2a.proto``, package ``lf.a2a.v1``) as pydantic models.

Field names are snake_case in Python and the spec's camelCase in JSON. Parsing is strict
where the protocol is: scalars are never coerced ("7" is not 7, 1 is not true), every
object refuses fields the proto does not define, and a ``Part`` carries exactly one kind
of content. Serialise with :func:`to_wire`, which drops unset fields as ProtoJSON does.

Every member ProtoJSON may leave out reads as its default: a proto3 field without
presence (a string, number, bool, enum, repeated field or map) at its default value is
not printed, so absent and default are one input and get one verdict. Such a field here
defaults to ``""``, ``0``, ``[]``, ``{}`` or the zero enum, and the default is validated
like a value sent: an absent ``messageId`` is refused as an empty
one is, an absent ``StringList.list`` is the empty scope list. Fields with presence
(``optional`` scalars, oneof members, messages) stay ``None`` when absent, except a
card's ``capabilities``, whose absence declares nothing (protobuf reads it as empty); a
task's ``status``, an event's ``status`` or ``artifact`` and a send's ``message`` must
be there, as nothing can be made of a task or event without them.
"""

from __future__ import annotations

import builtins
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    StrictStr,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from contracts.model import Model

PROTOCOL_VERSION = "1.0"
VERSION_HEADER = "A2A-Version"
AGENT_CARD_PATH = "/.well-known/agent-card.json"

NonEmptyStr = Annotated[StrictStr, Field(min_length=1)]
JSONObject = dict[str, Any]


class WireModel(Model):
    """Base for every A2A object: camelCase aliases, unknown fields refused, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
    )

    @model_validator(mode="before")
    @classmethod
    def _defaults_as_sent(cls, data: Any) -> Any:
        """A member left out that has a default other than None is validated as if it had
        been sent at that default: absent and default are one input (see the module)."""
        if not isinstance(data, dict):
            return data
        absent = {
            alias: info.get_default(call_default_factory=True)
            for alias, name, info in _defaulted(cls)
            if alias not in data and name not in data
        }
        return {**data, **absent} if absent else data


# Each model's members whose default is not None (wire name, field name, field), found
# at the model's first validation rather than on every one.
_DEFAULTED: dict[type[BaseModel], tuple[tuple[str, str, FieldInfo], ...]] = {}


def _defaulted(model: type[BaseModel]) -> tuple[tuple[str, str, FieldInfo], ...]:
    found = _DEFAULTED.get(model)
    if found is None:
        found = _DEFAULTED[model] = tuple(
            (info.alias or name, name, info)
            for name, info in model.model_fields.items()
            if info.default is not None
        )
    return found


def to_wire(model: BaseModel) -> dict[str, Any]:
    """The ProtoJSON-shaped dict of ``model``: camelCase keys, unset fields omitted."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Role(StrEnum):
    UNSPECIFIED = "ROLE_UNSPECIFIED"
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


class TaskState(StrEnum):
    UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    REJECTED = "TASK_STATE_REJECTED"


TERMINAL_TASK_STATES = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)
INTERRUPTED_TASK_STATES = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})


# --- Parts, messages, artifacts, tasks ---------------------------------------------------


class Part(WireModel):
    """One piece of content: exactly one of ``text``, ``raw`` (base64), ``url`` or ``data``."""

    text: StrictStr | None = None
    raw: StrictStr | None = None
    url: StrictStr | None = None
    data: Any = None
    metadata: JSONObject | None = None
    filename: StrictStr | None = None
    media_type: StrictStr | None = None

    @model_validator(mode="after")
    def _exactly_one_content(self) -> Part:
        present = [
            name
            for name in ("text", "raw", "url", "data")
            if getattr(self, name) is not None or name in self.model_fields_set
        ]
        if len(present) != 1:
            raise ValueError("a part carries exactly one of text, raw, url or data")
        if self.data is None and "data" in self.model_fields_set and type(self) is Part:
            # Settled here, on every path that makes a part (parsed or built), so that
            # only this rare part has a serializer of its own, not every part a dump meets.
            object.__setattr__(self, "__class__", _NullDataPart)
        return self


class _NullDataPart(Part):
    """A data part holding JSON null: it keeps that content when unset members go
    (``exclude_none``), as every part's dump is made by its own class
    (:data:`WirePart`)."""

    @model_serializer(mode="wrap")
    def _content_kept(self, handler: SerializerFunctionWrapHandler) -> Any:
        dumped = handler(self)
        if "data" in self.model_fields_set and self.data is None and isinstance(dumped, dict):
            dumped["data"] = None
        return dumped


# A part in a message or an artifact is dumped by its own class (a JSON-null data part's
# keeps its content), not by the class the field declares.
WirePart = SerializeAsAny[Part]


class Message(WireModel):
    message_id: NonEmptyStr = ""
    role: Role = Role.UNSPECIFIED
    parts: Annotated[list[WirePart], Field(min_length=1)] = []
    context_id: StrictStr | None = None
    task_id: StrictStr | None = None
    metadata: JSONObject | None = None
    extensions: list[StrictStr] | None = None
    reference_task_ids: list[StrictStr] | None = None


class Artifact(WireModel):
    artifact_id: NonEmptyStr = ""
    parts: Annotated[list[WirePart], Field(min_length=1)] = []
    name: StrictStr | None = None
    description: StrictStr | None = None
    metadata: JSONObject | None = None
    extensions: list[StrictStr] | None = None


class TaskStatus(WireModel):
    state: TaskState = TaskState.UNSPECIFIED
    message: Message | None = None
    timestamp: StrictStr | None = None


class Task(WireModel):
    id: NonEmptyStr = ""
    status: TaskStatus
    context_id: StrictStr | None = None
    artifacts: list[Artifact] | None = None
    history: list[Message] | None = None
    metadata: JSONObject | None = None


# --- Agent Card ----------------------------------------------------------------------------


class AgentInterface(WireModel):
    url: NonEmptyStr = ""
    protocol_binding: NonEmptyStr = ""
    protocol_version: NonEmptyStr = ""
    tenant: StrictStr | None = None


class AgentProvider(WireModel):
    url: StrictStr = ""
    organization: StrictStr = ""


class AgentExtension(WireModel):
    uri: StrictStr = ""
    description: StrictStr | None = None
    required: StrictBool | None = None
    params: JSONObject | None = None


class AgentCapabilities(WireModel):
    streaming: StrictBool | None = None
    push_notifications: StrictBool | None = None
    extensions: list[AgentExtension] | None = None
    extended_agent_card: StrictBool | None = None


class HTTPAuthSecurityScheme(WireModel):
    scheme: NonEmptyStr = ""
    description: StrictStr | None = None
    bearer_format: StrictStr | None = None


class SecurityScheme(WireModel):
    """A oneof wrapper; this project issues and understands HTTP bearer schemes.

    Other scheme kinds are kept as opaque objects so that a card declaring them still
    parses and can be shown to an operator.
    """

    http_auth_security_scheme: HTTPAuthSecurityScheme | None = None
    api_key_security_scheme: JSONObject | None = None
    oauth2_security_scheme: JSONObject | None = None
    open_id_connect_security_scheme: JSONObject | None = None
    mtls_security_scheme: JSONObject | None = None


class StringList(WireModel):
    list: builtins.list[StrictStr] = []


class SecurityRequirement(WireModel):
    schemes: dict[str, StringList] = {}


class AgentSkill(WireModel):
    id: NonEmptyStr = ""
    name: NonEmptyStr = ""
    description: StrictStr = ""
    tags: list[StrictStr] = []
    examples: list[StrictStr] | None = None
    input_modes: list[StrictStr] | None = None
    output_modes: list[StrictStr] | None = None
    security_requirements: list[SecurityRequirement] | None = None


class AgentCardSignature(WireModel):
    protected: NonEmptyStr = ""
    signature: NonEmptyStr = ""
    header: JSONObject | None = None


class AgentCard(WireModel):
    name: NonEmptyStr = ""
    description: StrictStr = ""
    supported_interfaces: Annotated[list[AgentInterface], Field(min_length=1)] = []
    version: StrictStr = ""
    capabilities: AgentCapabilities = AgentCapabilities()
    default_input_modes: list[StrictStr] = []
    default_output_modes: list[StrictStr] = []
    skills: list[AgentSkill] = []
    provider: AgentProvider | None = None
    documentation_url: StrictStr | None = None
    security_schemes: dict[str, SecurityScheme] | None = None
    security_requirements: list[SecurityRequirement] | None = None
    signatures: list[AgentCardSignature] | None = None
    icon_url: StrictStr | None = None

    def jsonrpc_interface(self) -> AgentInterface | None:
        """The first JSON-RPC interface at protocol version 1.x, if the card offers one."""
        for interface in self.supported_interfaces:
            if interface.protocol_binding == "JSONRPC" and _is_v1(interface.protocol_version):
                return interface
        return None

    def skill(self, skill_id: str) -> AgentSkill | None:
        return next((skill for skill in self.skills if skill.id == skill_id), None)


def _is_v1(version: str) -> bool:
    return version == "1" or version.startswith("1.")


# --- Requests and responses ----------------------------------------------------------------


class AuthenticationInfo(WireModel):
    scheme: NonEmptyStr = ""
    credentials: StrictStr | None = None


class TaskPushNotificationConfig(WireModel):
    url: NonEmptyStr = ""
    tenant: StrictStr | None = None
    id: StrictStr | None = None
    task_id: StrictStr | None = None
    token: StrictStr | None = None
    authentication: AuthenticationInfo | None = None


class SendMessageConfiguration(WireModel):
    accepted_output_modes: list[StrictStr] | None = None
    history_length: StrictInt | None = None
    return_immediately: StrictBool | None = None
    task_push_notification_config: TaskPushNotificationConfig | None = None


class SendMessageRequest(WireModel):
    message: Message
    tenant: StrictStr | None = None
    configuration: SendMessageConfiguration | None = None
    metadata: JSONObject | None = None


class SendMessageResponse(WireModel):
    """A oneof: the server answers with a Task or, for a quick reply, a Message."""

    task: Task | None = None
    message: Message | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> SendMessageResponse:
        if (self.task is None) == (self.message is None):
            raise ValueError("a SendMessage result holds exactly one of task or message")
        return self


class GetTaskRequest(WireModel):
    id: NonEmptyStr = ""
    tenant: StrictStr | None = None
    history_length: Annotated[StrictInt, Field(ge=0)] | None = None


class ListTasksRequest(WireModel):
    tenant: StrictStr | None = None
    context_id: StrictStr | None = None
    status: TaskState | None = None
    page_size: Annotated[StrictInt, Field(ge=1, le=100)] | None = None
    page_token: StrictStr | None = None
    history_length: Annotated[StrictInt, Field(ge=0)] | None = None
    status_timestamp_after: StrictStr | None = None
    include_artifacts: StrictBool | None = None


class ListTasksResponse(WireModel):
    tasks: list[Task] = []
    next_page_token: StrictStr = ""
    page_size: StrictInt = 0
    total_size: StrictInt = 0


class CancelTaskRequest(WireModel):
    id: NonEmptyStr = ""
    tenant: StrictStr | None = None
    metadata: JSONObject | None = None


class SubscribeToTaskRequest(WireModel):
    id: NonEmptyStr = ""
    tenant: StrictStr | None = None


class TaskPushNotificationConfigRequest(WireModel):
    """Get or delete one push notification config: ``taskId`` and the config's ``id``."""

    task_id: NonEmptyStr = ""
    id: NonEmptyStr = ""
    tenant: StrictStr | None = None


class ListTaskPushNotificationConfigsRequest(WireModel):
    """``pageSize`` has no presence in the proto: 0 is its default, the server's page."""

    task_id: NonEmptyStr = ""
    tenant: StrictStr | None = None
    page_size: Annotated[StrictInt, Field(ge=0, le=100)] | None = None
    page_token: StrictStr | None = None


class ListTaskPushNotificationConfigsResponse(WireModel):
    configs: list[TaskPushNotificationConfig] = []
    next_page_token: StrictStr = ""


class GetExtendedAgentCardRequest(WireModel):
    tenant: StrictStr | None = None


class Empty(WireModel):
    """The empty result (``google.protobuf.Empty``), e.g. of a delete."""


# --- Streaming -----------------------------------------------------------------------------


class TaskStatusUpdateEvent(WireModel):
    task_id: NonEmptyStr = ""
    context_id: StrictStr = ""
    status: TaskStatus
    metadata: JSONObject | None = None


class TaskArtifactUpdateEvent(WireModel):
    """One artifact, or one chunk of it: ``append`` adds parts to the artifact with the same
    id sent before; ``lastChunk`` marks its final chunk."""

    task_id: NonEmptyStr = ""
    context_id: StrictStr = ""
    artifact: Artifact
    append: StrictBool | None = None
    last_chunk: StrictBool | None = None
    metadata: JSONObject | None = None


class StreamResponse(WireModel):
    """A oneof: what one SSE event (or one push notification body) carries."""

    task: Task | None = None
    message: Message | None = None
    status_update: TaskStatusUpdateEvent | None = None
    artifact_update: TaskArtifactUpdateEvent | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> StreamResponse:
        present = [
            name
            for name in ("task", "message", "status_update", "artifact_update")
            if getattr(self, name) is not None
        ]
        if len(present) != 1:
            raise ValueError(
                "a stream response holds exactly one of task, message, statusUpdate or "
                "artifactUpdate"
            )
        return self

    @property
    def task_id(self) -> str | None:
        """The task this event is about (a message may name none)."""
        if self.task is not None:
            return self.task.id
        if self.status_update is not None:
            return self.status_update.task_id
        if self.artifact_update is not None:
            return self.artifact_update.task_id
        return self.message.task_id if self.message is not None else None


# --- JSON-RPC 2.0 envelopes ----------------------------------------------------------------

RequestId = StrictStr | StrictInt | None


class JSONRPCRequest(WireModel):
    jsonrpc: Literal["2.0"]
    method: NonEmptyStr
    id: RequestId = None
    params: JSONObject | None = None


class JSONRPCError(WireModel):
    code: StrictInt
    message: StrictStr
    data: Any = None


class JSONRPCResponse(WireModel):
    """A response carries ``result`` or ``error``, never both."""

    jsonrpc: Literal["2.0"]
    id: RequestId = None
    result: Any = None
    error: JSONRPCError | None = None

    @model_validator(mode="after")
    def _result_or_error(self) -> JSONRPCResponse:
        has_result = "result" in self.model_fields_set
        if has_result == (self.error is not None):
            raise ValueError("a JSON-RPC response holds exactly one of result or error")
        return self
