"""RFC 8785 (JCS) bytes of a JSON value, with an exact fast path for the common shape.

Grant claims and audit records are mostly objects of printable-ASCII strings, integers,
booleans, nulls and lists of them. For that shape sorted-key compact JSON is byte for
byte the JCS form: JCS sorts keys by UTF-16 code units, which for ASCII is plain order;
integers below 2**53 and the literals have one spelling; and such strings need no
escaping. It is several times cheaper than the general canonicaliser, which every other
value (floats, non-ASCII or escaped text, huge integers) still goes through.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import rfc8785

CanonicalizationError = rfc8785.CanonicalizationError


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 form of ``value``; raises :data:`CanonicalizationError`."""
    if _plain(value):
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")
    return rfc8785.dumps(value)


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) < 2**53
    if isinstance(value, str):
        return value.isascii() and value.isprintable() and '"' not in value and "\\" not in value
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_plain(item) for item in value)
    return False
