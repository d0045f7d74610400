"""The fast canonical form is byte for byte RFC 8785, whatever the value holds: the
differential tests compare it with ``rfc8785.dumps`` on values built to find where orjson's
output could part from JCS (escapes, key order by UTF-16 code units, integer limits)."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.canonical import CanonicalizationError, canonical_json

SCALARS = st.one_of(
    st.integers(min_value=-(2**60), max_value=2**60),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.dictionaries(st.text(max_size=8), children, max_size=4),
        st.lists(children, max_size=4),
    ),
    max_leaves=16,
)

# Characters where the two could differ: controls, DEL, the line separators, the ends of
# the BMP's private use area and of the BMP, lone surrogates, and beyond the BMP.
TRICKY_CHARACTERS = st.sampled_from(
    ["\x00", "\x08", "\x1f", "\x7f", '"', "\\", "/", "\u2028", "\ud7ff", "\ud800", "\udfff",
     "\ue000", "\uffff", "\ufeff", "\U00010000", "\U0001f600", "\U0010ffff", "a", "é"]
)  # fmt: skip
TRICKY_TEXT = st.text(st.one_of(TRICKY_CHARACTERS, st.characters()), max_size=6)
TRICKY_SCALARS = st.one_of(
    TRICKY_TEXT,
    st.integers(min_value=-(2**53) - 2, max_value=-(2**53) + 2),
    st.integers(min_value=2**53 - 2, max_value=2**53 + 2),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1.0, -0.0, 1e21, 1e-7, 5e-324, 2.0**53, 0.1, True, False, None]),
)
TRICKY_VALUES = st.recursive(
    TRICKY_SCALARS,
    lambda children: st.one_of(
        st.dictionaries(TRICKY_TEXT, children, max_size=5),
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
    ),
    max_leaves=20,
)


def assert_exactly_jcs(value: Any) -> None:
    """The bytes of ``rfc8785.dumps``, or its error (a lone surrogate in a key is a
    UnicodeError there)."""
    try:
        expected = rfc8785.dumps(value)
    except (CanonicalizationError, UnicodeError) as refused:
        with pytest.raises(type(refused)):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


@given(VALUES)
def test_canonical_json_is_exactly_jcs(value: Any) -> None:
    """Fast path or not, the bytes are what the RFC 8785 canonicaliser produces, and
    what it refuses (integers beyond 2**53, say) is refused too."""
    assert_exactly_jcs(value)


@settings(max_examples=500)
@given(TRICKY_VALUES)
def test_tricky_values_are_exactly_jcs(value: Any) -> None:
    """Lone surrogates, keys beyond the BMP, integers at the safe limit, floats, empties."""
    assert_exactly_jcs(value)


@pytest.mark.parametrize(
    "value",
    [
        {"\ue000": 1, "\U0001f600": 2},  # UTF-16 puts the surrogate pair first
        {"\uffff": [], "\U00010000": {}, "a": [{}], "é": [[]]},
        {"\ue000x": 1, "\ue000": 2, "\U0010ffff": 3, "\ud7ff": 4},
        {"n": [2**53 - 1, -(2**53) + 1, 0, -0, -1]},
        {"n": 2**53},
        {"n": -(2**63)},
        {"n": 2**64},
        {"": {"": [[], {}, ()]}},
        ("a", ("b", ()), []),
        {"f": 1.5, "g": 1e21, "h": -0.0},
        {"k\ud800": 1},
        ["\x7f\x00\u2029"],
    ],
)
def test_chosen_values_are_exactly_jcs(value: Any) -> None:
    """The cases the fast path has to hand over, each named once."""
    assert_exactly_jcs(value)


def test_deep_nesting_is_exactly_jcs() -> None:
    """Deeper than orjson nests (254): the general canonicaliser writes it."""
    value: Any = "leaf"
    for _ in range(300):
        value = {"k": [value]}
    assert_exactly_jcs(value)


def test_a_value_jcs_cannot_express_is_refused() -> None:
    """NaN has no JSON form: the general canonicaliser's error comes through."""
    with pytest.raises(CanonicalizationError):
        canonical_json({"x": float("nan")})


@pytest.mark.parametrize(
    "text",
    [
        '["urn:a2a-federation:coordinator","alice",null,"h-1"]',  # JSON text in a string
        'back\\slash and "quotes"',
        "tab\tnewline\nreturn\rbackspace\bform feed\f",
        "control \x01 and \x1f",
        "DEL \x7f",
        "non-ASCII é and \u2028 and \U0001f600",
        "lone surrogate \ud800",
        "escaped backslash before u: \\u0041",
    ],
    ids=["json-text", "quotes", "short-escapes", "controls", "del", "non-ascii", "surrogate", "u"],
)
def test_escaped_text_is_exactly_jcs(text: str) -> None:
    """Strings needing escapes, in values and keys: the fast path keeps only those
    spelt as JCS spells them."""
    values: list[Any] = [{"owner": text, "n": 1}, {text: [text, True]}]
    for value in values:
        try:
            expected = rfc8785.dumps(value)
        except (CanonicalizationError, UnicodeError) as refused:  # a lone surrogate
            with pytest.raises(type(refused)):
                canonical_json(value)
            continue
        assert canonical_json(value) == expected


def test_every_ascii_character_is_exactly_jcs() -> None:
    """Each ASCII character (the controls' escapes in lower-case hex, DEL raw) and a few
    beyond, in a key and in a value."""
    for point in [*range(0x80), 0x80, 0x9F, 0xA0, 0x2028, 0xFEFF, 0xFFFF, 0x10000, 0x10FFFF]:
        char = chr(point)
        assert_exactly_jcs({char: char, "k": [char, f"a{char}b"]})
