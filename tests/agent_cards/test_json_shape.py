"""The edge's body check: the shortcut for bodies in orjson's own spelling answers as
the scans do, on bodies chosen to part them."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent_cards.edge import json_shape
from agent_cards.edge.errors import JSONShapeError

MAX_DEPTH = 8
# Integers on both sides of I-JSON's range, floats of every size, text with digits,
# escapes and characters outside the BMP.
_INTEGERS = st.one_of(
    st.integers(-(2**60), 2**60), st.integers(2**53 - 3, 2**53 + 3), st.integers(-9, 9)
)
_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
_TEXT = st.text(st.characters(codec="utf-8"), max_size=24) | st.from_regex(r"\d{10,20}")
_LEAVES = st.none() | st.booleans() | _INTEGERS | _FLOATS | _TEXT
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


def verdict(check: Any, body: bytes) -> str:
    try:
        check(body)
    except JSONShapeError as refused:
        return refused.reason
    return "kept"


def answers_alike(body: bytes) -> None:
    shortcut = verdict(lambda b: json_shape.check_json_shape(b, max_depth=MAX_DEPTH), body)
    assert shortcut == verdict(lambda b: json_shape.scan(b, MAX_DEPTH), body)


@settings(max_examples=400)
@given(_VALUES)
@example([[[[[[[[[[1]]]]]]]]]])
@example({"n": 2**53})
@example({"n": -(2**53) + 1})
def test_a_value_as_orjson_writes_it_is_judged_as_the_scans_judge_it(value: Any) -> None:
    answers_alike(orjson.dumps(value))


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":"\\ud800"}',
        b'{"a":"\\ud83d\\ude00"}',
        b'{"a":1e400}',
        b'{"a":1E400}',
        b"\xef\xbb\xbf{}",
        b'{"a":"\xff"}',
        b'{"a":12345678901234567}',
        b'{"a":"1234567890123456"}',
        b'{"a":1,"a":2}',
        b'{"a" : 1}',
        b"[" * 40 + b"]" * 40,
    ],
)
def test_a_body_spelled_otherwise_is_judged_as_the_scans_judge_it(body: bytes) -> None:
    answers_alike(body)


def test_a_client_minted_body_takes_the_shortcut_and_a_large_one_the_scans() -> None:
    minted = orjson.dumps({"jsonrpc": "2.0", "id": 1, "params": {"text": "x" * 100}})
    assert json_shape._as_orjson_writes_it(minted) == orjson.loads(minted)
    assert json_shape._as_orjson_writes_it(orjson.dumps(["x" * 20_000])) is json_shape.UNREAD
    assert json_shape._as_orjson_writes_it(b'{"jsonrpc": "2.0"}') is json_shape.UNREAD
