"""An Agent Card's JSON as the two signers in the field see it.

:func:`card_with_presence` is A2A v1.0 section 8.4.1, rule 1: a member is kept when its
field is ``REQUIRED`` (``google.api.field_behavior``) or has explicit presence
(``optional``, a oneof member, a message), and left out when it holds its type's default
value otherwise (``false``, ``0``, ``""``, an empty list or map, the zero enum). A
``REQUIRED`` member the JSON leaves out (ProtoJSON does, at its default) is put back at
its default, since the rule says it is always present. So the same card has one
canonical form whether it arrived as JSON with ``"required": false`` in an extension,
as ProtoJSON without ``"description": ""``, or as a protobuf message over gRPC. Map
entries are kept whatever their value (``{"bearer": {}}`` names a scheme). The field
table is the normative ``a2a.proto`` (:mod:`agent_cards.bindings.grpc`); members the
proto does not name are kept as they are (they are signed content too), and
``google.protobuf.Struct`` / ``Value`` members (extension ``params``) are free JSON.

:func:`card_as_sdk_signs` is what the a2a-sdk (Python, 1.x) signs instead: the card read
into the protobuf message, printed by ``json_format.MessageToDict`` (defaults of fields
without presence left out, REQUIRED or not), then every empty string, list and object
removed at any depth, repeatedly (a requirement naming a scheme without scopes vanishes
altogether). A card the proto cannot read (a member it does not define, a wrong type)
has no such form.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from google.api import field_behavior_pb2
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from agent_cards.bindings.grpc import a2a_pb2

__all__ = ["card_as_sdk_signs", "card_with_presence", "without_empty"]

_FREE_JSON = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
_REQUIRED = field_behavior_pb2.REQUIRED


def card_with_presence(card: Mapping[str, Any], fill_required: bool = True) -> dict[str, Any]:
    """``card`` without the members the signature rules leave out and, with
    ``fill_required``, with each absent ``REQUIRED`` member at its default (the module)."""
    descriptor: Descriptor = a2a_pb2.AgentCard.DESCRIPTOR  # type: ignore[assignment]
    return _message(card, descriptor, fill_required)


def card_as_sdk_signs(card: Mapping[str, Any]) -> Any:
    """What the a2a-sdk signs of ``card`` (no ``signatures``, no nulls; the module), or
    None when the proto cannot read it."""
    try:
        message = json_format.ParseDict(dict(card), a2a_pb2.AgentCard())
    except (json_format.ParseError, ValueError, TypeError, RecursionError):
        return None
    return without_empty(json_format.MessageToDict(message)) or {}


def without_empty(value: Any) -> Any:
    """``value`` without empty strings, lists and objects, at any depth (None if empty)."""
    if isinstance(value, Mapping):
        kept = {k: c for k, v in value.items() if (c := without_empty(v)) is not None}
        return kept or None
    if isinstance(value, list | tuple):
        items = [c for v in value if (c := without_empty(v)) is not None]
        return items or None
    return None if value == "" else value


def _message(value: Mapping[str, Any], descriptor: Descriptor, fill: bool) -> dict[str, Any]:
    fields = _fields(descriptor)
    kept: dict[str, Any] = {}
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            kept[key] = item
        elif item is not None and not _omitted(field, item):
            kept[key] = _value(field, item, fill)
    if fill:
        for field in _absent_required(descriptor, value):
            kept[field.json_name] = _default(field)
    return kept


def _absent_required(descriptor: Descriptor, value: Mapping[str, Any]) -> list[FieldDescriptor]:
    return [
        field
        for field in descriptor.fields
        if _required(field) and value.get(field.json_name) is None and value.get(field.name) is None
    ]


def _default(field: FieldDescriptor) -> Any:
    """A ``REQUIRED`` field's JSON at its default, as rule 1 keeps it."""
    if _is_map(field):
        return {}
    if field.is_repeated:
        return []
    if field.message_type is not None:
        return _nested(field.message_type, {}, True)
    return _defaults(field)[0]


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


def _value(field: FieldDescriptor, item: Any, fill: bool) -> Any:
    message = field.message_type
    if message is None or message.full_name in _FREE_JSON:
        return item
    if _is_map(field):
        entry = message.fields_by_name["value"]
        if entry.message_type is None or not isinstance(item, Mapping):
            return item
        return {key: _nested(entry.message_type, value, fill) for key, value in item.items()}
    if field.is_repeated and isinstance(item, list):
        return [_nested(message, element, fill) for element in item]
    return _nested(message, item, fill)


def _nested(descriptor: Descriptor, item: Any, fill: bool) -> Any:
    if descriptor.full_name in _FREE_JSON or not isinstance(item, Mapping):
        return item
    return _message(item, descriptor, fill)


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
