"""Hold a JSON body to what both parties read the same way, before anything parses it.

:func:`check_json_shape` refuses, with a stable reason:

``json_not_utf8``          not UTF-8, or a byte order mark (RFC 8259 section 8.1)
``json_lone_surrogate``    a ``\\uD800``-style escape that is not half of a pair: no
                           UTF-8 can hold it, so it would fail later, deep in a handler
``json_too_deep``          arrays and objects nested deeper than the limit (the
                           standard decoder recurses, and ~1,000 levels exhaust it)
``json_too_wide``          more members and items than any message holds, in all or
                           in one object or array (decoding millions of them takes
                           seconds); both rules are
                           :func:`contracts.strict_json.check_bounds`, the one every
                           parser of received JSON runs
``json_number_out_of_range``  an integer beyond +-(2**53 - 1), or a number that is not a
                           finite IEEE 754 double (``1e400``), per I-JSON (RFC 7493)

It never builds a document of any size: it scans the bytes with regular expressions
(strings removed first, so brackets and digits inside strings do not count). Whether the
bytes are valid JSON at all is left to the parser that runs next. One shortcut gives the
same answers: a short body spelled exactly as orjson writes it (what this project's
clients send) is read by orjson, which already refuses what the scans look for except
the bounds, checked as before, and an integer beyond range, which a run of sixteen
digits sends to the scans (:func:`_as_orjson_writes_it`).
"""

from __future__ import annotations

import codecs
import math
import re
from typing import Any, Final

from agent_cards.edge.errors import JSONShapeError
from agent_cards.edge.limits import MAX_SAFE_INTEGER
from contracts.strict_json import (
    MAX_MEMBERS,
    NOT_ITS_SPELLING,
    JSONOutOfBounds,
    as_orjson_writes_it,
    check_bounds,
)

_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_ESCAPE = re.compile(rb"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F]")
# Numbers that might be out of range: 16 or more digits in a row (2**53 has 16), or an
# exponent of three or more digits; every shorter spelling is a finite double in range.
_SUSPECT_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LONG = re.compile(rb"\d{16,}|[eE][+-]?\d{3,}")
# Every digit as a zero: sixteen zeros in a row after it are sixteen digits, the length
# of an integer beyond I-JSON's range (2**53 has 16), found without a pattern's scan.
_DIGITS_AS_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_SIXTEEN_DIGITS = b"0" * 16
# What check_json_shape returns for a body the scans judged: no document was read.
UNREAD: Final = NOT_ITS_SPELLING


def check_json_shape(body: bytes, *, max_depth: int) -> Any:
    """Refuse ``body`` (see the module docstring); return the document orjson read from
    it when the shortcut took it, else :data:`UNREAD`."""
    document = _as_orjson_writes_it(body)
    if document is UNREAD:
        scan(body, max_depth)
    else:
        _check_bounds(body.decode("utf-8"), max_depth)
    return document


def scan(body: bytes, max_depth: int) -> None:
    """:func:`check_json_shape` by the scans alone, whatever the body's spelling."""
    if body.startswith(_BOMS):
        raise JSONShapeError("json_not_utf8", "the body starts with a byte order mark")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise JSONShapeError("json_not_utf8", "the body is not UTF-8") from None
    _check_bounds(text, max_depth)
    # the strings are looked through only when the body holds a surrogate's escape at all
    if _SURROGATE_HINT.search(body):
        for string in _STRING.findall(body):
            if _SURROGATE_HINT.search(string):
                _check_surrogates(string)
    outside = _STRING.sub(b'""', body)
    if _LONG.search(outside):
        for match in _SUSPECT_NUMBER.finditer(outside):
            if _LONG.search(match.group()):
                _check_number(match.group())


def _as_orjson_writes_it(body: bytes) -> Any:
    """The document in ``body``, read by orjson, if ``body`` is short (never more bytes
    than one object may hold members), is spelled exactly as orjson writes it (the
    strict parser's own test, :func:`contracts.strict_json.as_orjson_writes_it`) and
    holds no run of sixteen digits; else :data:`UNREAD`. Such a body is UTF-8 with no byte
    order mark (orjson reads nothing else and writes none), holds no escaped lone
    surrogate (orjson refuses one), no number that is not a finite double (orjson refuses
    one, or reads it as a number it writes otherwise) and no integer beyond I-JSON's range
    (every one has sixteen digits): of the module's refusals only the bounds are left."""
    if len(body) > MAX_MEMBERS or _SIXTEEN_DIGITS in body.translate(_DIGITS_AS_ZEROS):
        return UNREAD
    return as_orjson_writes_it(body)


def _check_bounds(text: str, max_depth: int) -> None:
    try:
        check_bounds(text, max_depth)
    except JSONOutOfBounds as exc:
        raise JSONShapeError(exc.reason, str(exc)) from None


def _check_number(text: bytes) -> None:
    if re.fullmatch(rb"-?\d+", text):
        if len(text.lstrip(b"-")) > 16 or abs(int(text)) > MAX_SAFE_INTEGER:
            raise JSONShapeError(
                "json_number_out_of_range", "an integer beyond +-(2**53 - 1) (I-JSON)"
            )
        return
    value = float(text)
    if not math.isfinite(value):
        raise JSONShapeError(
            "json_number_out_of_range", "a number that is not a finite double (I-JSON)"
        )


def _check_surrogates(string: bytes) -> None:
    """Every escaped high surrogate is directly followed by an escaped low one, and no
    low surrogate stands alone."""
    pending_high = False
    last_end = -1
    for match in _ESCAPE.finditer(string):
        unit = _code_unit(match.group(1))
        adjacent = match.start() == last_end
        if pending_high and not (adjacent and unit is not None and 0xDC00 <= unit <= 0xDFFF):
            raise _lone()
        if pending_high:
            pending_high = False
        elif unit is not None and 0xDC00 <= unit <= 0xDFFF:
            raise _lone()
        else:
            pending_high = unit is not None and 0xD800 <= unit <= 0xDBFF
        last_end = match.end()
    if pending_high:
        raise _lone()


def _code_unit(escape: bytes) -> int | None:
    return int(escape[1:], 16) if escape[:1] == b"u" and len(escape) == 5 else None


def _lone() -> JSONShapeError:
    return JSONShapeError("json_lone_surrogate", "a \\u escape of an unpaired surrogate")
