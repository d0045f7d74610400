"""The fast canonical form is byte for byte RFC 8785, whatever the value holds."""

from __future__ import annotations

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
def test_canonical_json_is_exactly_jcs(value: object) -> None:
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
