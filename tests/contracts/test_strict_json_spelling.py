"""Strict JSON read at C speed when it is in orjson's compact spelling, and as before otherwise.

:func:`contracts.strict_json.loads` hands text that is exactly what orjson writes for its
reading to orjson, and any other text to the standard library's decoder with the strict
hooks. Both must read every text alike: the same values of the same types, and the same
refusal (duplicate keys, non-finite constants, bad text) with the same message.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import strict_json


def reference(text: str) -> Any:
    """What ``loads`` answered before the compact spelling was read by orjson."""
    try:
        strict_json.check_bounds(text)
        return ("value", typed(strict_json._DECODER.decode(text)))
    except strict_json.StrictJSONError as exc:
        return ("refused", type(exc).__name__, str(exc))
    except ValueError as exc:
        return ("refused", "StrictJSONError", f"not valid JSON: {exc}")


def answer(text: str) -> Any:
    try:
        return ("value", typed(strict_json.loads(text)))
    except strict_json.StrictJSONError as exc:
        return ("refused", type(exc).__name__, str(exc))


def typed(value: Any) -> Any:
    """``value`` with every leaf's type beside it (``1``, ``1.0`` and ``True`` differ)."""
    if isinstance(value, dict):
        return ("object", [(key, typed(member)) for key, member in value.items()])
    if isinstance(value, list):
        return ("array", [typed(item) for item in value])
    return (type(value).__name__, repr(value))


class CountingDecoder(json.JSONDecoder):
    def __init__(self) -> None:
        super().__init__(
            object_pairs_hook=strict_json._object_without_duplicates,
            parse_constant=strict_json._reject_constant,
        )
        self.calls = 0

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return super().decode(s, *args, **kwargs)


TRICKY = [
    '{"a":1,"a":2}',  # a duplicate, compact
    '{"a":{"b":1,"b":1}}',
    '{"a": 1, "a": 1}',
    "NaN",
    "[Infinity]",
    "-Infinity",
    "-0",
    "-0.0",
    "1E5",
    "1e16",
    "1e400",
    "18446744073709551615",
    "18446744073709551616",
    "123456789012345678901234567890",
    "1.8446744073709552e+19",
    "5e-324",
    '"\\u0000"',
    '"\\/"',
    '"\\ud800"',
    '"\ud800"',
    '"\udc00x"',
    '"\x7f\u2028\U0001f600"',
    '"\\u00e9"',
    '"\u00e9"',
    '"\x01"',  # a raw control character
    '{"k":[1,2.5,true,false,null,"s"]}',
    "[]",
    "{}",
    '{"":""}',
    " {}",
    "{} ",
    "[1,]",
    "",
    "tru",
    "[" * 65 + "]" * 65,
    "[" * 64 + "]" * 64,
]


@pytest.mark.parametrize("text", TRICKY)
def test_a_tricky_text_reads_as_before(text: str) -> None:
    assert answer(text) == reference(text)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_any_value_written_compactly_reads_as_before(value: Any) -> None:
    try:
        text = orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert answer(text) == reference(text)


@settings(max_examples=400, deadline=None)
@given(json_values, st.sampled_from([None, " ", "ascii"]))
def test_any_value_written_otherwise_reads_as_before(value: Any, spelling: str | None) -> None:
    if spelling == " ":
        text = json.dumps(value)
    elif spelling == "ascii":
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert answer(text) == reference(text)


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet='{}[],:"\\ -+.0123456789eEnulltrfasNIy\u00e9\ud800\x00ab', max_size=24))
def test_any_text_reads_as_before(text: str) -> None:
    assert answer(text) == reference(text)


def test_compact_text_is_read_without_the_standard_librarys_decoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoder = CountingDecoder()
    monkeypatch.setattr(strict_json, "_DECODER", decoder)
    claims = {"iss": "coordinator", "aud": "é", "handoff": {"attempt": 1}}
    minted = orjson.dumps(claims)
    assert strict_json.loads(minted) == claims
    assert strict_json.loads(minted.decode()) == strict_json.loads(minted)
    assert decoder.calls == 0
    with pytest.raises(strict_json.StrictJSONError, match="duplicate key 'a'"):
        strict_json.loads('{"a":1,"a":2}')
    assert strict_json.loads('{"a": 1}') == {"a": 1}
    assert decoder.calls == 2  # each spelled otherwise, judged by the strict decoder
