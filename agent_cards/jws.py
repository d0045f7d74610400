"""Base64url (RFC 7515 section 2) and the segments of a compact JWS, read strictly.

One decoder for every JWS segment and every token a service issues or receives: unpadded
base64url in its canonical spelling only. A lenient decoder (the standard library's,
which drops characters outside the alphabet and accepts non-zero trailing bits) would
let two spellings stand for one value, so a kid, a claim or a signature could be read
from text that is not what was signed. Anything else raises :class:`ValueError`.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from contracts import strict_json

__all__ = ["b64url_decode", "b64url_encode", "segment_json"]

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def b64url_encode(data: bytes) -> str:
    """Base64url without padding (RFC 7515 section 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict base64url without padding; anything else raises :class:`ValueError`."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64url_encode(data) != text:
        raise ValueError("non-canonical base64url")
    return data


def segment_json(jws: str, index: int) -> Any:
    """The JSON value in segment ``index`` of compact JWS ``jws`` (0: the protected
    header, 1: the payload), unverified; :class:`ValueError` if there is none."""
    parts = jws.split(".")
    if len(parts) != 3:
        raise ValueError("not a compact JWS")
    return strict_json.loads(b64url_decode(parts[index]))
