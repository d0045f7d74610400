"""Strict JSON decoding for data that crossed a trust boundary.

The standard library accepts duplicate object keys (last one wins) and the non-standard
constants ``NaN``, ``Infinity`` and ``-Infinity``. Either can make two parties read the same
bytes differently, so both are refused here.

It also recurses once per level of nesting, so a document of 20,000 ``[`` exhausts the
interpreter's stack (``RecursionError``, not a ``ValueError``), and it builds every value
of a wide document, which under an 8 MB cap is millions (seconds of a service's time,
and longer for whoever validates them next). So every document is held, before it is
decoded, to :data:`MAX_DEPTH` levels of arrays and objects (``json_too_deep``), to
:data:`MAX_VALUES` members and items in all (``json_too_wide``) and to
:data:`MAX_MEMBERS` members or items in any one object or array (``json_too_wide``).
This is the one rule of a document's shape: the HTTP edge's body check
(:mod:`agent_cards.edge.json_shape`) and every parser of what another party sent (remote
replies, stream events, push notifications, cards, JWK Sets, model replies, request
bodies) come through :func:`check_bounds`. (A gRPC message is protobuf, not JSON: the
protobuf parser's own recursion limit of 100 messages keeps it under 64 JSON levels, and
the gRPC message size cap bounds its width.)
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from contracts.canonical import plain

# Levels of arrays and objects any document we read may nest (the edge's default too).
MAX_DEPTH = 64
# Members and items a document may hold in all, and in any one object or array: far
# above what any message holds (a page of 500 runs, among the widest, holds about 7,000).
MAX_VALUES = 100_000
MAX_MEMBERS = 10_000
NOT_JSON = "not_json"
JSON_TOO_DEEP = "json_too_deep"
JSON_TOO_WIDE = "json_too_wide"

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_SKELETON = bytes(set(range(256)) - set(b"[]{},"))
_PAIR = re.compile(r"\[\]|\{\}")
_INNERMOST = re.compile(r"\[,*\]|\{,*\}")


class StrictJSONError(ValueError):
    """The bytes are not a single strict JSON document; ``reason`` is a stable code."""

    reason = NOT_JSON


class JSONOutOfBounds(StrictJSONError):
    """A document beyond one of the bounds of its shape (too deep or too wide)."""


class JSONTooDeep(JSONOutOfBounds):
    """Arrays and objects nest deeper than the limit."""

    reason = JSON_TOO_DEEP

    def __init__(self, max_depth: int) -> None:
        super().__init__(f"arrays and objects nest deeper than {max_depth}")
        self.max_depth = max_depth


class JSONTooWide(JSONOutOfBounds):
    """More members and items than the limit, in all or in one object or array."""

    reason = JSON_TOO_WIDE


def check_bounds(text: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse ``text`` if it nests deeper than ``max_depth`` (:class:`JSONTooDeep`) or
    holds more members and items than :data:`MAX_VALUES` in all or :data:`MAX_MEMBERS` in
    one object or array (:class:`JSONTooWide`). Nothing is decoded; what is inside
    strings does not count. A short document is let through at once."""
    if len(text) <= MAX_MEMBERS and text.count("[") + text.count("{") <= max_depth:
        return
    skeleton = _skeleton(text)
    _check_total(skeleton)
    _check_depth_of(skeleton.replace(",", ""), max_depth)
    _check_members(skeleton)


def check_depth(text: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse ``text`` (:class:`JSONTooDeep`) if its arrays and objects nest deeper than
    ``max_depth``; brackets inside strings do not count. Nothing is decoded."""
    if text.count("[") + text.count("{") > max_depth:
        _check_depth_of(_skeleton(text).replace(",", ""), max_depth)


def _skeleton(text: str) -> str:
    """``text`` without its strings, of its brackets and commas only."""
    outside = _STRING.sub("", text).encode("utf-8", "surrogatepass")
    return outside.translate(None, _NOT_SKELETON).decode("ascii")


def _check_total(skeleton: str) -> None:
    """Each member or item but a container's first follows a comma, so commas plus
    containers count every one (an empty container counts one too)."""
    count = skeleton.count(",") + skeleton.count("[") + skeleton.count("{")
    if count > MAX_VALUES:
        raise JSONTooWide(f"more than {MAX_VALUES} members and items")


def _check_members(skeleton: str) -> None:
    """Each pass removes the innermost objects and arrays (brackets around nothing but
    commas), after measuring the widest of them; passes are at most the depth, already
    bounded."""
    if skeleton.count(",") < MAX_MEMBERS:
        return
    left = skeleton
    while innermost := _INNERMOST.findall(left):
        if max(map(len, innermost)) - 1 > MAX_MEMBERS:
            raise JSONTooWide(f"more than {MAX_MEMBERS} members or items in one object or array")
        left = _INNERMOST.sub("", left)


def _check_depth_of(brackets: str, max_depth: int) -> None:
    """Each pass removes the innermost empty pairs at C speed, which takes one level off
    every branch, so a wide document shrinks fast. Once a pass no longer halves what is
    left (a narrow, deep document, or brackets that do not pair up), the rest is counted
    one bracket at a time, with the levels already removed."""
    left = brackets
    removed = 0
    while left and removed <= max_depth:
        shorter = _PAIR.sub("", left)
        if len(shorter) * 2 > len(left):
            break
        left, removed = shorter, removed + 1
    if removed > max_depth:
        raise JSONTooDeep(max_depth)
    _count_depth(left, max_depth - removed)


def _count_depth(brackets: str, max_depth: int) -> None:
    depth = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            if depth > max_depth:
                raise JSONTooDeep(max_depth)
        else:
            depth -= 1


def _reject_constant(name: str) -> Any:
    raise StrictJSONError(f"non-finite number {name} is not JSON")


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # some key came twice: name it
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise StrictJSONError(f"duplicate key {key!r}")
            seen.add(key)
    return obj


# One decoder for every call (json.loads with hooks builds a new one each time).
_DECODER = json.JSONDecoder(
    object_pairs_hook=_object_without_duplicates, parse_constant=_reject_constant
)


# What :func:`as_orjson_writes_it` answers for text that orjson would spell otherwise.
NOT_ITS_SPELLING: Any = object()


def as_orjson_writes_it(text: bytes | str) -> Any:
    """orjson's reading of ``text`` (UTF-8 bytes, or a str) when ``text`` is exactly what
    orjson writes for that reading (compact, its escapes and its number spellings): such
    text names each key of an object once (orjson writes each once), holds no constant
    for a number, and reads as the same values in the standard library. Anything else,
    and whatever orjson refuses, is :data:`NOT_ITS_SPELLING`, for the standard library's
    decoder to read and judge: documents minted by this project (orjson's compact form)
    are read at C speed, every other spelling exactly as before."""
    try:
        value = orjson.loads(text)
        written = orjson.dumps(value)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return NOT_ITS_SPELLING
    spelled = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return value if written == spelled else NOT_ITS_SPELLING


def loads(data: bytes | str) -> Any:
    """Decode one JSON document, refusing duplicate keys, non-finite numbers and a shape
    beyond :func:`check_bounds`.

    Text is taken as :func:`json.loads` takes it: bytes in the encoding their first bytes
    show (UTF-8, -16 or -32), a str that starts with a byte order mark refused. Text in
    orjson's compact spelling is read by orjson (the same values, see
    :func:`as_orjson_writes_it`), any other by the standard library's decoder."""
    try:
        if isinstance(data, str):
            if data.startswith("\ufeff"):
                raise StrictJSONError("not valid JSON: a byte order mark before the document")
            text = data
        else:
            text = data.decode(json.detect_encoding(data), "surrogatepass")
        check_bounds(text)
        value = as_orjson_writes_it(text)
        return _DECODER.decode(text) if value is NOT_ITS_SPELLING else value
    except StrictJSONError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise StrictJSONError(f"not valid JSON: {exc}") from None


# Built once: ``json.dumps`` with options makes a new encoder on every call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def dumps(value: Any) -> bytes:
    """Encode compactly (keys in their order, text as UTF-8), refusing non-finite floats
    rather than emitting ``NaN``.

    A value of the plain shape (:func:`~contracts.canonical.plain`: objects, arrays,
    strings, safe integers, booleans, null) is written by orjson, whose compact output
    for that shape is byte for byte the standard library's with these options: the same
    escapes (the quote, the backslash, the five short ones, ``\\u00xx`` for the other
    control characters), everything else raw. Any other value, and whatever orjson
    refuses (a lone surrogate, deep nesting), takes the standard library's encoder."""
    if plain(value):
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError:
            pass
    return _COMPACT.encode(value).encode()


def json_equal(one: Any, other: Any) -> bool:
    """Equality of two JSON values as JSON has it, not as Python does: a boolean is never
    a number (``true`` is not ``1``), ``1`` and ``1.0`` are the same number, and objects
    and arrays are equal member by member."""
    if isinstance(one, bool) or isinstance(other, bool):
        return type(one) is type(other) and one == other
    if isinstance(one, int | float) and isinstance(other, int | float):
        return one == other
    if isinstance(one, dict) and isinstance(other, dict):
        return one.keys() == other.keys() and all(json_equal(one[k], other[k]) for k in one)
    if isinstance(one, list) and isinstance(other, list):
        return len(one) == len(other) and all(map(json_equal, one, other))
    return type(one) is type(other) and one == other
