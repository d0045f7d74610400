"""RFC 8785 (JCS) bytes of a JSON value, with an exact fast path for the common shape.

Grant claims and audit records are mostly objects of strings, integers, booleans, nulls
and lists of them. For that shape orjson's sorted-key compact output is byte for byte the
JCS form: integers below 2**53 and the literals have one spelling; strings are escaped as
ECMAScript's JSON.stringify does (the quote, the backslash, the short escapes for
backspace, tab, newline, form feed and carriage return, ``\\u00xx`` in lower case for the
other control characters, everything else, DEL and non-ASCII included, written raw as
UTF-8); and keys are sorted by code point, which is JCS's order by UTF-16 code units
except between a character from U+E000 to U+FFFF and one beyond the BMP. So output that
holds such a character takes the general canonicaliser, as does every value of another
shape (floats, huge integers, subclasses) and whatever orjson refuses (a lone surrogate).
tests/contracts/test_canonical.py compares the two on values chosen to part them.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import rfc8785

CanonicalizationError = rfc8785.CanonicalizationError


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 form of ``value``; raises :data:`CanonicalizationError`."""
    if plain(value):
        try:
            text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # a lone surrogate, or nesting beyond orjson's
            pass
        else:
            if text.isascii() or _UTF16_ORDER_MAY_DIFFER.search(text) is None:
                return text
    return rfc8785.dumps(value)


# UTF-8 lead bytes of U+E000..U+FFFF (0xEE, 0xEF) and of the planes beyond (0xF0..0xF4):
# only where both meet in one object's keys do code point and UTF-16 order disagree.
_UTF16_ORDER_MAY_DIFFER = re.compile(rb"[\xee-\xf4]")
_SAFE = 2**53
# The exact types that need no look inside: no spelling of theirs differs between the two.
_LEAVES = frozenset((str, bool, type(None)))


def plain(value: Any) -> bool:
    """Only objects with string keys, lists, strings, safe integers, booleans and nulls.
    (Exact types: a subclass takes the general path, and so do the types orjson writes
    but JCS refuses, a UUID or a datetime say.) An object's leaves are passed over where
    they are met, the walk's most common step."""
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
