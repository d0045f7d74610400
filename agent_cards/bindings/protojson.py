"""Our wire models (:mod:`contracts.wire`) to and from the generated protobuf messages.

Both sides are ProtoJSON-shaped (camelCase members, enums as their names, bytes as
base64, ``Struct`` / ``Value`` as plain JSON), so the mapping goes through that JSON:
:func:`to_proto` parses a model's :func:`~contracts.wire.to_wire` form into a message,
:func:`from_proto` prints a message and validates it as a model. Printing omits
proto3 fields at their default value, which our models would read as missing; so
:func:`proto_dict` puts back the defaults of the fields a model requires (e.g. a
``ListTasksResponse`` on its last page has ``nextPageToken: ""``). A ``Struct`` holds
every number as a double: a whole number within 2**53 is read back as an integer, so
``{"attempt": 1}`` sent over gRPC arrives as it was sent, not as ``1.0``.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar, get_args, get_origin

from google.protobuf import json_format, unknown_fields
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message as ProtoMessage
from pydantic import BaseModel

from agent_cards.bindings.lenient import model_in
from contracts.wire import to_wire

__all__ = ["from_proto", "proto_dict", "to_proto", "unknown_paths"]

ModelT = TypeVar("ModelT", bound=BaseModel)
ProtoT = TypeVar("ProtoT", bound=ProtoMessage)


def to_proto(model: BaseModel, message_type: type[ProtoT]) -> ProtoT:
    """``model`` as a ``message_type``; a member the proto lacks is an error (ours)."""
    return json_format.ParseDict(to_wire(model), message_type())


def proto_dict(message: ProtoMessage, model: type[BaseModel] | None = None) -> dict[str, Any]:
    """``message`` as ProtoJSON; with ``model``, the fields it requires are present."""
    document: dict[str, Any] = _whole_numbers(json_format.MessageToDict(message))
    if model is not None:
        _fill_required(message, document, model)
    return document


def from_proto(message: ProtoMessage, model: type[ModelT]) -> ModelT:
    """``message`` validated as ``model`` (strictly, as any wire document is)."""
    return model.model_validate(proto_dict(message, model))


def unknown_paths(message: ProtoMessage, path: str = "") -> list[str]:
    """Where ``message`` (a parsed request) carries fields its proto does not define,
    as ``path.#number``: kept by protobuf, ignored by us, and worth counting."""
    unknown = unknown_fields.UnknownFieldSet(message)
    found = [f"{path}#{unknown[i].field_number}" for i in range(len(unknown))]
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None or _is_map(descriptor):
            continue
        where = f"{path}{descriptor.json_name}."
        items = value if descriptor.is_repeated else [value]
        for index, item in enumerate(items):
            inner = f"{path}{descriptor.json_name}[{index}]." if descriptor.is_repeated else where
            found.extend(unknown_paths(item, inner))
    return found


def _fill_required(message: ProtoMessage, document: dict[str, Any], model: type[BaseModel]) -> None:
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    for descriptor in message.DESCRIPTOR.fields:
        key = descriptor.json_name
        info = fields.get(key)
        if info is None:
            continue
        if key not in document and info.is_required():
            document[key] = _default_json(descriptor)
        value = getattr(message, descriptor.name)
        if _is_map(descriptor):
            _fill_map(value, document.get(key), _dict_value_model(info.annotation))
            continue
        nested = model_in(info.annotation)
        if nested is None or descriptor.message_type is None:
            continue
        if descriptor.is_repeated and isinstance(document.get(key), list):
            for item, part in zip(value, document[key], strict=False):
                if isinstance(part, dict) and isinstance(item, ProtoMessage):
                    _fill_required(item, part, nested)
        elif isinstance(document.get(key), dict) and isinstance(value, ProtoMessage):
            _fill_required(value, document[key], nested)


def _is_map(descriptor: Any) -> bool:
    entry = descriptor.message_type
    return bool(descriptor.is_repeated and entry is not None and entry.GetOptions().map_entry)


def _fill_map(value: Any, document: Any, model: type[BaseModel] | None) -> None:
    """Each message value of a map field (e.g. ``schemes: {name: StringList}``)."""
    if model is None or not isinstance(document, dict):
        return
    for name, part in document.items():
        item = value.get(name)
        if isinstance(part, dict) and isinstance(item, ProtoMessage):
            _fill_required(item, part, model)


def _dict_value_model(annotation: Any) -> type[BaseModel] | None:
    for member in (annotation, *get_args(annotation)):
        if get_origin(member) is dict:
            return model_in(get_args(member)[1])
    return None


def _default_json(descriptor: Any) -> Any:
    """The ProtoJSON of a field left at its proto3 default."""
    if descriptor.is_repeated:
        entry = descriptor.message_type
        return {} if entry is not None and entry.GetOptions().map_entry else []
    if descriptor.enum_type is not None:
        return descriptor.enum_type.values[0].name
    if descriptor.message_type is not None:
        return {}
    return _SCALAR_DEFAULTS.get(descriptor.type, 0)


_SCALAR_DEFAULTS: dict[int, Any] = {
    FieldDescriptor.TYPE_BOOL: False,
    FieldDescriptor.TYPE_STRING: "",
    FieldDescriptor.TYPE_BYTES: "",
}


_EXACT = 2**53


def _whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT:
        return int(value) if value or math.copysign(1, value) > 0 else value  # -0.0 stays
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value
