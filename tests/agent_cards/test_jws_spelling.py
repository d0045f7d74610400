"""The strict base64url decoder checks its text before decoding, and decides as before.

:func:`agent_cards.jws.b64url_decode` once decoded leniently and compared the text with
the encoding of what it read; it now checks the alphabet, the length and the unused bits
of the last character first. Every text must get the same answer from both.
"""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_cards.jws import b64url_decode, b64url_encode

_B64URL = re.compile(r"[A-Za-z0-9_-]*")
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def decoded_before(text: str) -> bytes:
    """The decoder as it was: lenient decoding, then the text compared with its encoding."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64url_encode(data) != text:
        raise ValueError("non-canonical base64url")
    return data


def answer(decode: object, text: str) -> tuple[str, object]:
    try:
        return ("bytes", decode(text))  # type: ignore[operator]
    except ValueError as exc:
        return ("refused", str(exc))


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.sampled_from(ALPHABET + "=+/. \n\u00e9\x00"), max_size=14))
def test_any_text_is_decided_as_before(text: str) -> None:
    assert answer(b64url_decode, text) == answer(decoded_before, text)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40), st.integers(min_value=0, max_value=63))
def test_every_last_character_is_decided_as_before(data: bytes, last: int) -> None:
    text = b64url_encode(data)
    respelt = text[:-1] + ALPHABET[last] if text else ALPHABET[last]
    assert answer(b64url_decode, text) == ("bytes", data)
    assert answer(b64url_decode, respelt) == answer(decoded_before, respelt)


@pytest.mark.parametrize("text", ["", "AA", "AAA", "AAAA", "_w", "_x", "A", "A===", "\u00e9AAA"])
def test_edges_are_decided_as_before(text: str) -> None:
    assert answer(b64url_decode, text) == answer(decoded_before, text)
