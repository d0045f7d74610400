"""Base64url (RFC 7515 section 2) and the segments of a compact JWS, read strictly.

One decoder for every JWS segment and every token a service issues or receives: unpadded
base64url in its canonical spelling only. A lenient decoder (the standard library's,
which drops characters outside the alphabet and accepts non-zero trailing bits) would
let two spellings stand for one value, so a kid, a claim or a signature could be read
from text that is not what was signed. Anything else raises :class:`ValueError`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from contracts import strict_json

__all__ = ["b64url_decode", "b64url_encode", "segment_json"]

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
_PADDING = (b"", b"", b"==", b"=")
# The last character of a final group of 2 (or 3) characters carries 4 (or 2) bits
# beyond the data; the one canonical spelling has them zero (RFC 4648 section 3.5).
_CANONICAL_LAST = ("", "", "AQgw", "AEIMQUYcgkosw048")


def b64url_encode(data: bytes) -> str:
    """Base64url without padding (RFC 7515 section 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict base64url without padding; anything else raises :class:`ValueError`.

    The alphabet, the length and the unused bits of the last character are checked
    before anything is decoded, so every decoded text is the one spelling
    :func:`b64url_encode` writes for its bytes."""
    final = len(text) % 4
    if not text.isascii() or final == 1:
        raise ValueError("not unpadded base64url")
    ascii_text = text.encode("ascii")
    if ascii_text.translate(None, _ALPHABET):
        raise ValueError("not unpadded base64url")
    if final and text[-1] not in _CANONICAL_LAST[final]:
        raise ValueError("non-canonical base64url")
    return binascii.a2b_base64(ascii_text.translate(_TO_STANDARD) + _PADDING[final])


def segment_json(jws: str, index: int) -> Any:
    """The JSON value in segment ``index`` of compact JWS ``jws`` (0: the protected
    header, 1: the payload), unverified; :class:`ValueError` if there is none."""
    parts = jws.split(".")
    if len(parts) != 3:
        raise ValueError("not a compact JWS")
    return strict_json.loads(b64url_decode(parts[index]))
