"""Strict JSON decoding for data that crossed a trust boundary.

The standard library accepts duplicate object keys (last one wins) and the non-standard
constants ``NaN``, ``Infinity`` and ``-Infinity``. Either can make two parties read the same
bytes differently, so both are refused here.
"""

from __future__ import annotations

import json
from typing import Any


class StrictJSONError(ValueError):
    """The bytes are not a single strict JSON document."""


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


def loads(data: bytes | str) -> Any:
    """Decode one JSON document, refusing duplicate keys and non-finite numbers.

    Text is taken as :func:`json.loads` takes it: bytes in the encoding their first bytes
    show (UTF-8, -16 or -32), a str that starts with a byte order mark refused."""
    try:
        if isinstance(data, str):
            if data.startswith("\ufeff"):
                raise StrictJSONError("not valid JSON: a byte order mark before the document")
            text = data
        else:
            text = data.decode(json.detect_encoding(data), "surrogatepass")
        return _DECODER.decode(text)
    except StrictJSONError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise StrictJSONError(f"not valid JSON: {exc}") from None


def dumps(value: Any) -> bytes:
    """Encode compactly, refusing non-finite floats rather than emitting ``NaN``."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()
