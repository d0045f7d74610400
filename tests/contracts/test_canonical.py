"""The fast canonical form is byte for byte RFC 8785, whatever the value holds."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given
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


@given(VALUES)
def test_canonical_json_is_exactly_jcs(value: Any) -> None:
    """Fast path or not, the bytes are what the RFC 8785 canonicaliser produces, and
    what it refuses (integers beyond 2**53, say) is refused too."""
    try:
        expected = rfc8785.dumps(value)
    except CanonicalizationError:
        with pytest.raises(CanonicalizationError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


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
