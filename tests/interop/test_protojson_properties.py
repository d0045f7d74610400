"""What any ProtoJSON printer emits parses in our wire models and round-trips, and card
signatures verify across our signer and the a2a-sdk's.

Messages of every type of the normative ``a2a.proto`` are drawn at random from its
descriptors (:mod:`tests.interop.proto_messages`), printed by protobuf's own
``json_format`` twice (defaults left out, as every ProtoJSON printer does by default,
and defaults included), parsed by our models (:mod:`contracts.wire`) as the JSON
bindings parse them and, from the message itself, as the gRPC binding does
(:func:`~agent_cards.bindings.protojson.from_proto`); each model printed again
(:func:`~contracts.wire.to_wire`) must parse back into the very message drawn. Random
cards signed by the a2a-sdk's signer verify with ours, and cards signed by ours verify
with the a2a-sdk's verifier.
"""

from __future__ import annotations

from typing import Any

import a2a.types as sdk
import pytest
from a2a.utils.signing import create_agent_card_signer, create_signature_verifier
from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage
from hypothesis import HealthCheck, given, settings
from pydantic import BaseModel

from agent_cards.bindings.grpc import a2a_pb2
from agent_cards.bindings.protojson import from_proto
from agent_cards.keys import SigningKey, TrustedKeys
from agent_cards.signing import SDK_FORM, SPEC_FORM, sign_card, verify_card
from contracts import wire
from contracts.a2a_errors import ERROR_INFO_TYPE, TASK_NOT_FOUND
from coordinator.remote.wire.wire_errors import from_http_status_body
from tests.interop.proto_messages import messages

# Each message of a2a.proto and the model that reads it; the others are carried inside
# one of these as free JSON (SecurityScheme's non-HTTP members) and are drawn there.
MODELS: dict[str, type[BaseModel]] = {
    "Part": wire.Part,
    "Message": wire.Message,
    "Artifact": wire.Artifact,
    "TaskStatus": wire.TaskStatus,
    "Task": wire.Task,
    "AgentInterface": wire.AgentInterface,
    "AgentProvider": wire.AgentProvider,
    "AgentExtension": wire.AgentExtension,
    "AgentCapabilities": wire.AgentCapabilities,
    "HTTPAuthSecurityScheme": wire.HTTPAuthSecurityScheme,
    "SecurityScheme": wire.SecurityScheme,
    "StringList": wire.StringList,
    "SecurityRequirement": wire.SecurityRequirement,
    "AgentSkill": wire.AgentSkill,
    "AgentCardSignature": wire.AgentCardSignature,
    "AgentCard": wire.AgentCard,
    "AuthenticationInfo": wire.AuthenticationInfo,
    "TaskPushNotificationConfig": wire.TaskPushNotificationConfig,
    "SendMessageConfiguration": wire.SendMessageConfiguration,
    "SendMessageRequest": wire.SendMessageRequest,
    "SendMessageResponse": wire.SendMessageResponse,
    "GetTaskRequest": wire.GetTaskRequest,
    "ListTasksRequest": wire.ListTasksRequest,
    "ListTasksResponse": wire.ListTasksResponse,
    "CancelTaskRequest": wire.CancelTaskRequest,
    "SubscribeToTaskRequest": wire.SubscribeToTaskRequest,
    "GetTaskPushNotificationConfigRequest": wire.TaskPushNotificationConfigRequest,
    "DeleteTaskPushNotificationConfigRequest": wire.TaskPushNotificationConfigRequest,
    "ListTaskPushNotificationConfigsRequest": wire.ListTaskPushNotificationConfigsRequest,
    "ListTaskPushNotificationConfigsResponse": wire.ListTaskPushNotificationConfigsResponse,
    "GetExtendedAgentCardRequest": wire.GetExtendedAgentCardRequest,
    "StreamResponse": wire.StreamResponse,
    "TaskStatusUpdateEvent": wire.TaskStatusUpdateEvent,
    "TaskArtifactUpdateEvent": wire.TaskArtifactUpdateEvent,
}
CARRIED_AS_JSON = {
    "APIKeySecurityScheme",
    "OAuth2SecurityScheme",
    "OAuthFlows",
    "AuthorizationCodeOAuthFlow",
    "ClientCredentialsOAuthFlow",
    "ImplicitOAuthFlow",
    "PasswordOAuthFlow",
    "DeviceCodeOAuthFlow",
    "OpenIdConnectSecurityScheme",
    "MutualTlsSecurityScheme",
}
EXAMPLES = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
KEY = SigningKey.generate()
PINNED = TrustedKeys([KEY.verification_key()])


def test_every_message_of_the_proto_has_a_model_or_a_carrier() -> None:
    """A message added to a2a.proto fails here until a model reads it."""
    assert set(a2a_pb2.DESCRIPTOR.message_types_by_name) == set(MODELS) | CARRIED_AS_JSON


def printed(message: ProtoMessage, defaults: bool) -> dict[str, Any]:
    document: dict[str, Any] = json_format.MessageToDict(
        message, always_print_fields_with_no_presence=defaults
    )
    return document


def parsed_back(model: BaseModel, message: ProtoMessage) -> ProtoMessage:
    return json_format.ParseDict(wire.to_wire(model), type(message)())


def _round_trip(name: str, message: ProtoMessage) -> None:
    model = MODELS[name]
    for defaults in (False, True):
        document = printed(message, defaults)
        read = model.model_validate(document)
        assert parsed_back(read, message) == message, (defaults, document, wire.to_wire(read))
    over_grpc = from_proto(message, model)
    assert parsed_back(over_grpc, message) == message


@pytest.mark.parametrize("name", sorted(MODELS))
def test_protojson_of_every_message_type_parses_and_round_trips(name: str) -> None:
    """Whatever ProtoJSON leaves out reads as its default, whatever it includes reads as
    sent, on the JSON bindings and on gRPC; printed again it is the same message."""

    @EXAMPLES
    @given(messages(name))
    def check(message: ProtoMessage) -> None:
        _round_trip(name, message)

    check()


def _sdk_card(card: ProtoMessage) -> sdk.AgentCard:
    """Our generated AgentCard as the SDK's (the same proto, another descriptor pool)."""
    return sdk.AgentCard.FromString(card.SerializeToString())


def _unsigned(card: ProtoMessage) -> ProtoMessage:
    del card.signatures[:]  # type: ignore[attr-defined]
    return card


SDK_SIGNER = create_agent_card_signer(
    KEY.private_pem(), {"alg": "EdDSA", "kid": KEY.kid, "typ": "JOSE"}
)
SDK_VERIFIER = create_signature_verifier(lambda kid, jku: KEY.private_key.public_key(), ["EdDSA"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages("AgentCard").map(_unsigned))
def test_cards_signed_by_the_sdk_verify_with_ours(card: ProtoMessage) -> None:
    """A random card signed by the a2a-sdk's signer, as its card route prints it, verifies
    with the pinned key, over the specification's form when the two forms agree and over
    the a2a-sdk's otherwise; a changed name breaks it."""
    signed = SDK_SIGNER(_sdk_card(card))
    document = json_format.MessageToDict(signed)
    verified = verify_card(document, PINNED)
    assert verified.kid == KEY.kid and verified.form in (SPEC_FORM, SDK_FORM)
    with pytest.raises(Exception, match="card_signature_invalid"):
        verify_card({**document, "name": document["name"] + "x"}, PINNED)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages("AgentCard").map(_unsigned))
def test_cards_signed_by_us_verify_with_the_sdk(card: ProtoMessage) -> None:
    """A random card signed by our signer verifies with the a2a-sdk's verifier, printed
    with or without its defaults, and with ours over the specification's form."""
    for defaults in (False, True):
        signed = sign_card(printed(card, defaults), KEY)
        assert verify_card(signed, PINNED).form == SPEC_FORM
        SDK_VERIFIER(json_format.ParseDict(signed, sdk.AgentCard()))


@pytest.mark.parametrize(
    "error",
    [
        {"status": "NOT_FOUND"},
        {"details": [{"@type": ERROR_INFO_TYPE, "reason": TASK_NOT_FOUND.reason}]},
        {"code": 404, "status": "NOT_FOUND", "message": "", "details": []},
    ],
)
def test_a_status_body_without_its_default_members_names_the_same_error(
    error: dict[str, Any],
) -> None:
    """An HTTP+JSON error body is a ``google.rpc.Status``: without ``message``, ``code``
    or ``details`` (ProtoJSON leaves them out when empty) it still names its A2A error."""
    assert from_http_status_body(404, {"error": error}, "peer").code == TASK_NOT_FOUND.code
