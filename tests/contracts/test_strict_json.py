"""Strict JSON reads what the standard library reads, except duplicates and non-finite numbers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import strict_json
from tests.contracts.test_canonical import TRICKY_VALUES

DOCUMENTS = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=16,
)


@given(DOCUMENTS, st.sampled_from(["utf-8", "utf-16", "utf-32"]))
def test_a_valid_document_reads_as_the_standard_library_reads_it(
    value: object, encoding: str
) -> None:
    """Text and bytes in any of JSON's encodings decode to the same value as json.loads."""
    text = json.dumps(value, ensure_ascii=False)
    assert strict_json.loads(text) == json.loads(text)
    assert strict_json.loads(text.encode(encoding)) == json.loads(text.encode(encoding))


@pytest.mark.parametrize(
    "document",
    [
        b'{"a":1,"a":2}',
        b'[{"b":{"c":1,"c":1}}]',
        b"NaN",
        b'{"x":-Infinity}',
        "\ufeff{}",
        b"[1,]",
        b"\xff",
    ],
)
def test_what_two_readers_could_read_differently_is_refused(document: bytes | str) -> None:
    """Duplicate keys at any depth, non-finite constants and malformed text raise
    StrictJSONError."""
    with pytest.raises(strict_json.StrictJSONError):
        strict_json.loads(document)


@pytest.mark.parametrize(
    ("one", "other", "equal"),
    [
        (True, 1, False),
        (0, False, False),
        (1, 1.0, True),
        ("1", 1, False),
        (None, None, True),
        (None, False, False),
        ({"a": [1, True]}, {"a": [1.0, True]}, True),
        ({"a": [1, True]}, {"a": [1, 1]}, False),
        ([1, 2], [1, 2, 3], False),
        ({"a": 1}, {"a": 1, "b": None}, False),
    ],
)
def test_json_values_are_equal_as_json_has_it(one: object, other: object, equal: bool) -> None:
    assert strict_json.json_equal(one, other) is equal
    assert strict_json.json_equal(other, one) is equal


WIDE = [
    "[" + "0," * strict_json.MAX_MEMBERS + "0]",  # one array past the per-container cap
    "{" + ",".join(f'"k{n}":0' for n in range(strict_json.MAX_MEMBERS + 1)) + "}",
    "[" + ",".join(["[" + "0," * 4_999 + "0]"] * 21) + "]",  # 105,000 in all
    "[" + "[]," * strict_json.MAX_VALUES + "[]]",  # empty arrays count too
]


@pytest.mark.parametrize("text", WIDE, ids=["array", "object", "in-all", "empty-arrays"])
def test_a_document_wider_than_any_message_is_refused_before_decoding(text: str) -> None:
    with pytest.raises(strict_json.JSONTooWide) as refused:
        strict_json.loads(text)
    assert refused.value.reason == "json_too_wide"
    assert isinstance(refused.value, strict_json.JSONOutOfBounds)


def test_wide_documents_within_the_caps_decode() -> None:
    """A container at the cap, 95,000 values in all, and commas inside strings (which do
    not count) all decode."""
    at_cap = "[" + "0," * (strict_json.MAX_MEMBERS - 1) + "0]"
    assert len(strict_json.loads(at_cap)) == strict_json.MAX_MEMBERS
    spread = "[" + ",".join(["[" + "0," * 4_999 + "0]"] * 19) + "]"
    assert len(strict_json.loads(spread)) == 19
    commas = strict_json.dumps(["," * 200_000, {"k": "[" * 100}])
    assert strict_json.loads(commas)[0] == "," * 200_000


@settings(deadline=None)  # no timing in tests: the machine may be busy
@given(DOCUMENTS)
def test_dumps_writes_what_compact_json_dumps_writes(document: object) -> None:
    """Its one encoder, built once, writes what ``json.dumps`` with its options did."""
    expected = json.dumps(document, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    assert strict_json.dumps(document) == expected.encode()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [float("-inf")]])
def test_dumps_refuses_non_finite_numbers(value: object) -> None:
    with pytest.raises(ValueError):
        strict_json.dumps(value)


def _compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


@settings(deadline=None)
@given(TRICKY_VALUES)
def test_dumps_of_tricky_values_is_the_standard_librarys(value: object) -> None:
    """orjson writes the plain shape: on values chosen to part the two encoders (controls,
    DEL, line separators, lone surrogates, the edges of safe integers, floats, tuples),
    the bytes are the standard library's, or both refuse the value."""
    try:
        expected = _compact(value)
    except (ValueError, UnicodeError) as refused:
        with pytest.raises(type(refused)):
            strict_json.dumps(value)
        return
    assert strict_json.dumps(value) == expected


def test_every_character_below_0x80_is_written_as_the_standard_library_writes_it() -> None:
    for code in range(0x80):
        value = {chr(code): [chr(code), "a" + chr(code) + "b"]}
        assert strict_json.dumps(value) == _compact(value)


def test_subclasses_and_floats_take_the_standard_librarys_encoder() -> None:
    class Name(str):
        pass

    for value in ([Name("x"), 2**64, 0.1, 1e21], {"k": True}, (1, "é", None)):
        assert strict_json.dumps(value) == _compact(value)
