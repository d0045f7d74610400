"""Random valid A2A messages of any type, drawn from the normative ``a2a.proto`` itself.

:func:`messages` walks a message's descriptor (:mod:`agent_cards.bindings.grpc.a2a_pb2`):
every field of every type, nested messages, repeated fields, maps, oneofs,
``google.protobuf.Struct`` / ``Value`` / ``Timestamp``. "Valid" is the specification's
(section 5.7): a ``REQUIRED`` field is set and not at its default (an array holds at least
one element), a real oneof holds exactly one member; every other field is set or not at
random, to any value, its default included, which is what ProtoJSON then leaves out.
Beyond the proto the specification bounds a few numbers (:data:`BOUNDS`, e.g. a page of
1 to 100 tasks). Nesting is cut at :data:`MAX_DEPTH` by leaving optional messages unset.
"""

from __future__ import annotations

from typing import Any

from google.api import field_behavior_pb2
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor, OneofDescriptor
from google.protobuf.message import Message as ProtoMessage
from hypothesis import strategies as st

from agent_cards.bindings.grpc import a2a_pb2

MAX_DEPTH = 4
# Ranges the specification gives beyond the proto's int32 (message, field): low, high.
BOUNDS: dict[tuple[str, str], tuple[int, int]] = {
    ("ListTasksRequest", "page_size"): (1, 100),
    ("ListTaskPushNotificationConfigsRequest", "page_size"): (0, 100),
}
INT_RANGE = (0, 1000)
_CHARACTERS = st.characters(codec="utf-8", exclude_categories=("Cs",))
_TEXT = st.text(_CHARACTERS, max_size=6)
_NON_EMPTY = st.text(_CHARACTERS, min_size=1, max_size=6)


def message_class(name: str) -> type[ProtoMessage]:
    cls: type[ProtoMessage] = getattr(a2a_pb2, name)
    return cls


def messages(name: str) -> st.SearchStrategy[ProtoMessage]:
    """Random valid ``lf.a2a.v1.<name>`` messages."""
    descriptor: Descriptor = message_class(name).DESCRIPTOR  # type: ignore[assignment]
    return _message(descriptor, 0)


def _required(field: FieldDescriptor) -> bool:
    behaviours = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    return field_behavior_pb2.REQUIRED in behaviours


def _real_oneofs(descriptor: Descriptor) -> list[OneofDescriptor]:
    return [
        oneof
        for oneof in descriptor.oneofs
        if not (len(oneof.fields) == 1 and oneof.name == "_" + oneof.fields[0].name)
    ]


def _is_map(field: FieldDescriptor) -> bool:
    entry = field.message_type
    return entry is not None and entry.GetOptions().map_entry


@st.composite
def _message_draw(draw: Any, descriptor: Descriptor, depth: int) -> ProtoMessage:
    cls = _class_of(descriptor)
    message = cls()
    oneofs = _real_oneofs(descriptor)
    in_oneof = {field.name for oneof in oneofs for field in oneof.fields}
    for oneof in oneofs:
        field = draw(st.sampled_from(list(oneof.fields)))
        _set(message, field, draw(_value(descriptor, field, depth, False)))
    for field in descriptor.fields:
        if field.name in in_oneof:
            continue
        required = _required(field)
        if not required and (depth >= MAX_DEPTH and field.message_type is not None):
            continue
        if not required and not draw(st.booleans()):
            continue
        _set(message, field, draw(_value(descriptor, field, depth, required)))
    return message


def _message(descriptor: Descriptor, depth: int) -> st.SearchStrategy[ProtoMessage]:
    return _message_draw(descriptor, depth)


def _class_of(descriptor: Descriptor) -> type[ProtoMessage]:
    name = descriptor.full_name.removeprefix("lf.a2a.v1.")
    return message_class(name)


def _set(message: ProtoMessage, field: FieldDescriptor, value: Any) -> None:
    if _is_map(field):
        target = getattr(message, field.name)
        for key, item in value.items():
            if isinstance(item, ProtoMessage):
                target[key].CopyFrom(item)
            else:
                target[key] = item
    elif field.is_repeated:
        target = getattr(message, field.name)
        for item in value:
            if isinstance(item, ProtoMessage):
                target.add().CopyFrom(item)
            else:
                target.append(item)
    elif field.message_type is not None and field.message_type.full_name in _WELL_KNOWN:
        _WELL_KNOWN[field.message_type.full_name][1](getattr(message, field.name), value)
    elif isinstance(value, ProtoMessage):
        getattr(message, field.name).CopyFrom(value)
    else:
        setattr(message, field.name, value)


def _value(
    owner: Descriptor, field: FieldDescriptor, depth: int, required: bool
) -> st.SearchStrategy[Any]:
    if _is_map(field):
        entry = field.message_type
        value_field = entry.fields_by_name["value"]
        values = _single(owner, value_field, depth + 1, False)
        return st.dictionaries(_TEXT, values, min_size=1 if required else 0, max_size=2)
    if field.is_repeated:
        return st.lists(
            _single(owner, field, depth + 1, True), min_size=1 if required else 0, max_size=2
        )
    return _single(owner, field, depth + 1, required)


def _single(
    owner: Descriptor, field: FieldDescriptor, depth: int, required: bool
) -> st.SearchStrategy[Any]:
    message = field.message_type
    if message is not None:
        known = _WELL_KNOWN.get(message.full_name)
        return known[0] if known is not None else _message(message, depth)
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return _NON_EMPTY if required else _TEXT
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(min_size=1 if required else 0, max_size=6)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.just(True) if required else st.booleans()
    if kind == FieldDescriptor.TYPE_ENUM:
        numbers = [value.number for value in field.enum_type.values]
        return st.sampled_from([n for n in numbers if n] if required else numbers)
    low, high = BOUNDS.get((owner.name, field.name), INT_RANGE)
    return st.integers(max(low, 1) if required else low, high)


_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False, width=64)
    | st.integers(-(2**31), 2**31)
    | _TEXT
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_TEXT, inner, max_size=2),
    max_leaves=4,
)


def _set_timestamp(target: Any, value: tuple[int, int]) -> None:
    target.seconds, target.nanos = value


# Well-known types, drawn as plain values and set into the generated message's own class
# (the private descriptor pool has its own Struct): strategy and setter.
_WELL_KNOWN: dict[str, tuple[st.SearchStrategy[Any], Any]] = {
    "google.protobuf.Struct": (
        st.dictionaries(_TEXT, _JSON, max_size=2),
        lambda target, value: target.update(value),
    ),
    "google.protobuf.Value": (
        _JSON,
        lambda target, value: json_format.ParseDict(value, target),
    ),
    "google.protobuf.Timestamp": (
        st.tuples(st.integers(0, 253402300799), st.integers(0, 999_999_999)),
        _set_timestamp,
    ),
}
