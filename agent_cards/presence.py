"""An Agent Card's JSON as A2A's signature rules see it: proto field presence respected.

Before a card is canonicalized for signing (A2A v1.0 section 8.4.1, rule 1), a member is
kept when its field is ``REQUIRED`` (``google.api.field_behavior``) or has explicit
presence (``optional``, a message), and left out when it holds its type's default value
otherwise (``false``, ``0``, ``""``, an empty list or map, the zero enum). So the same card
has one canonical form whether it arrived as JSON with ``"required": false`` in an
extension or as a protobuf message over gRPC, where that default cannot be told from
absence. The field table is the normative ``a2a.proto`` (:mod:`agent_cards.bindings.grpc`);
members the proto does not name are kept as they are (they are signed content too), and
``google.protobuf.Struct`` / ``Value`` members (extension ``params``) are free JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from google.api import field_behavior_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from agent_cards.bindings.grpc import a2a_pb2

__all__ = ["card_with_presence"]

_FREE_JSON = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
_REQUIRED = field_behavior_pb2.REQUIRED


def card_with_presence(card: Mapping[str, Any]) -> dict[str, Any]:
    """``card`` without the members the signature rules leave out (see the module)."""
    descriptor: Descriptor = a2a_pb2.AgentCard.DESCRIPTOR  # type: ignore[assignment]
    return _message(card, descriptor)


def _message(value: Mapping[str, Any], descriptor: Descriptor) -> dict[str, Any]:
    fields = _fields(descriptor)
    kept: dict[str, Any] = {}
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            kept[key] = item
        elif item is not None and not _omitted(field, item):
            kept[key] = _value(field, item)
    return kept


@cache
def _fields(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    by_name = {field.json_name: field for field in descriptor.fields}
    by_name.update({field.name: field for field in descriptor.fields})
    return by_name


def _omitted(field: FieldDescriptor, item: Any) -> bool:
    if _required(field):
        return False
    if _is_map(field) or field.is_repeated:
        return isinstance(item, list | Mapping) and len(item) == 0
    if field.has_presence:
        return False
    return item in _defaults(field)


def _value(field: FieldDescriptor, item: Any) -> Any:
    message = field.message_type
    if message is None or message.full_name in _FREE_JSON:
        return item
    if _is_map(field):
        entry = message.fields_by_name["value"]
        if entry.message_type is None or not isinstance(item, Mapping):
            return item
        return {key: _nested(entry.message_type, value) for key, value in item.items()}
    if field.is_repeated and isinstance(item, list):
        return [_nested(message, element) for element in item]
    return _nested(message, item)


def _nested(descriptor: Descriptor, item: Any) -> Any:
    if descriptor.full_name in _FREE_JSON or not isinstance(item, Mapping):
        return item
    return _message(item, descriptor)


def _required(field: FieldDescriptor) -> bool:
    return _REQUIRED in field.GetOptions().Extensions[field_behavior_pb2.field_behavior]


def _is_map(field: FieldDescriptor) -> bool:
    message = field.message_type
    return message is not None and message.GetOptions().map_entry


def _defaults(field: FieldDescriptor) -> tuple[Any, ...]:
    if field.type == FieldDescriptor.TYPE_BOOL:
        return (False,)
    if field.type == FieldDescriptor.TYPE_STRING or field.type == FieldDescriptor.TYPE_BYTES:
        return ("",)
    if field.type == FieldDescriptor.TYPE_ENUM:
        zero = field.enum_type.values_by_number.get(0) if field.enum_type else None
        return (zero.name, 0) if zero is not None else (0,)
    if field.message_type is not None:
        return ()
    return (0, "0")  # numbers; 64-bit integers are strings in ProtoJSON
