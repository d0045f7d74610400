"""One strict base64url for every JWS segment: a spelling the signer did not write is refused."""

from __future__ import annotations

import pytest

from agent_cards.jws import b64url_decode, b64url_encode, segment_json
from contracts import strict_json
from coordinator.audit.log.tree_heads import header_kid
from coordinator.audit.receipts import protected_header
from coordinator.errors import LedgerError, UsageError
from coordinator.service.run_list import decode_cursor, encode_cursor

HEADER = b64url_encode(strict_json.dumps({"alg": "EdDSA", "kid": "k1"}))


@pytest.mark.parametrize(
    "text",
    [HEADER + "=", HEADER[:4] + "*" + HEADER[4:], HEADER[:-1] + "#", "A", " " + HEADER],
)
def test_anything_but_canonical_unpadded_base64url_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        b64url_decode(text)


def test_non_canonical_trailing_bits_are_refused() -> None:
    canonical = b64url_encode(b"\xff")  # "_w": the last character carries 4 unused bits
    assert b64url_decode(canonical) == b"\xff"
    with pytest.raises(ValueError):
        b64url_decode("_x")


def test_a_segment_is_read_only_from_a_compact_jws() -> None:
    assert segment_json(f"{HEADER}.e30.c2ln", 0) == {"alg": "EdDSA", "kid": "k1"}
    with pytest.raises(ValueError):
        segment_json(f"{HEADER}.e30", 0)


def test_the_coordinators_jws_readers_are_strict() -> None:
    """A kid or header read from a spelling with junk in it is not read at all (the
    lenient decoder dropped characters outside the alphabet and read the rest)."""
    junk = HEADER[:4] + "!!!!" + HEADER[4:]
    assert header_kid(f"{HEADER}.e30.c2ln") == "k1"
    assert header_kid(f"{junk}.e30.c2ln") is None
    assert protected_header({"protected": HEADER})["kid"] == "k1"
    with pytest.raises(LedgerError):
        protected_header({"protected": junk})


def test_a_run_cursor_round_trips_and_a_doctored_one_is_refused() -> None:
    cursor = encode_cursor(("2026-01-01T00:00:00Z", "run-1"))
    assert decode_cursor(cursor) == ("2026-01-01T00:00:00Z", "run-1")
    with pytest.raises(UsageError):
        decode_cursor(cursor + "=")
