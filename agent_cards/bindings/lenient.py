"""Unknown fields of an A2A object: set aside and named, never refused.

The spec says implementations SHOULD ignore fields they do not recognise (a v1.1 peer
adding one must not be locked out), while our wire models (:mod:`contracts.wire`) refuse
them, as the governance contracts must. :func:`known_part` walks a JSON document along a
model's declared fields and returns the part the model knows plus the path of every
member it left out, so the caller can count or log them; nothing is dropped silently.
Free-form members (``metadata``, a data part's ``data``) are not walked: what they hold
is checked, strictly, by whoever reads them (e.g. a Finding).
"""

from __future__ import annotations

import functools
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["known_part", "model_in"]


def known_part(model: type[BaseModel], document: Any, path: str = "") -> tuple[Any, list[str]]:
    """``document`` without the members ``model`` (and its nested models) does not declare,
    and the dotted path of each member left out. Anything not a JSON object is returned
    unchanged for the model's own validation to judge."""
    if not isinstance(document, dict) or model.model_config.get("extra") == "allow":
        return document, []
    fields = _fields(model)
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in document.items():
        where = f"{path}.{key}" if path else key
        if key not in fields:
            ignored.append(where)
            continue
        kept[key], inner = _walk(fields[key], value, where)
        ignored.extend(inner)
    return kept, ignored


# A field's models: the one its value may be (directly, in a list or a union member) and
# the one its list's items are.
_Models = tuple[type[BaseModel] | None, type[BaseModel] | None]


@functools.cache
def _fields(model: type[BaseModel]) -> dict[str, _Models]:
    """Each field of ``model`` by its wire name and by its Python name, with its models
    (worked out once per model: a request walks the same few models every time)."""
    annotations = {
        (info.alias or name): info.annotation for name, info in model.model_fields.items()
    }
    annotations.update({name: info.annotation for name, info in model.model_fields.items()})
    return {key: (model_in(a), _item_model(a)) for key, a in annotations.items()}


def _walk(models: _Models, value: Any, path: str) -> tuple[Any, list[str]]:
    nested, item = models
    if nested is not None and isinstance(value, dict):
        return known_part(nested, value, path)
    if item is not None and isinstance(value, list):
        walked = [known_part(item, element, f"{path}[{i}]") for i, element in enumerate(value)]
        return [element for element, _ in walked], [p for _, inner in walked for p in inner]
    return value, []


def _members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) is Annotated:  # a type with notes (how it is dumped, say)
        return _members(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The model ``annotation`` names, directly, in a list or as one member of a union."""
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    item = _item_model(annotation)
    return item


def _item_model(annotation: Any) -> type[BaseModel] | None:
    for member in _members(annotation):
        if get_origin(member) is list:
            (item,) = get_args(member) or (None,)
            inner = model_in(item)
            if inner is not None:
                return inner
    return None
