"""RFC 8785 (JCS) bytes of a JSON value, with an exact fast path for the common shape.

Grant claims and audit records are mostly objects of ASCII strings, integers, booleans,
nulls and lists of them. For that shape sorted-key compact JSON is byte for byte the JCS
form: JCS sorts keys by UTF-16 code units, which for ASCII is plain order; integers
below 2**53 and the literals have one spelling; and JCS escapes strings as ECMAScript's
JSON.stringify does, which for the quote, the backslash and the control characters with
a short escape (backspace, tab, newline, form feed, carriage return) is Python's spelling
too (JSON text held in a string, say). Only the six-character unicode escapes differ, or
may (Python writes non-ASCII text and DEL that way, JCS writes them raw), so a text with
one takes the general canonicaliser, as does every other value (floats, huge integers).
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

CanonicalizationError = rfc8785.CanonicalizationError


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 form of ``value``; raises :data:`CanonicalizationError`."""
    if _plain(value):
        text = _SORTED_COMPACT.encode(value)
        if "\\u" not in text:  # only escapes spelt alike (JSON text inside a string, say)
            return text.encode("ascii")
    return rfc8785.dumps(value)


# Built once: ``json.dumps`` with options makes a new encoder on every call.
_SORTED_COMPACT = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_SAFE = 2**53
# The exact types that need no look inside: no spelling of theirs differs between the two.
_LEAVES = frozenset((str, bool, type(None)))


def _plain(value: Any) -> bool:
    """Only objects with string keys, lists, strings, safe integers, booleans and nulls.
    (Exact types: a subclass takes the general path.) String contents are checked on the
    output instead: any escape there means the value is not of the plain shape. An
    object's leaves are passed over where they are met, the walk's most common step."""
    stack = [value]
    push, extend, leaves = stack.append, stack.extend, _LEAVES
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key, member in item.items():
                if type(key) is not str:
                    return False
                if type(member) not in leaves:
                    push(member)
        elif kind in leaves:
            continue
        elif kind is int:
            if not -_SAFE < item < _SAFE:
                return False
        elif kind is list or kind is tuple:
            extend(item)
        else:
            return False
    return True
