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
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise StrictJSONError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def loads(data: bytes | str) -> Any:
    """Decode one JSON document, refusing duplicate keys and non-finite numbers."""
    try:
        return json.loads(
            data,
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_reject_constant,
        )
    except StrictJSONError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise StrictJSONError(f"not valid JSON: {exc}") from None


def dumps(value: Any) -> bytes:
    """Encode compactly, refusing non-finite floats rather than emitting ``NaN``."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()
