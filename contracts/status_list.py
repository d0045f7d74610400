"""The bit array of an IETF OAuth Token Status List (draft-ietf-oauth-status-list), 1 bit
per token: ``lst`` is the base64url (unpadded) ZLIB-compressed byte array, and the
status of index ``i`` is bit ``i % 8`` (least significant first) of byte ``i // 8``.
Pure: no clock, no keys, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Iterable
from typing import Any

MAX_LIST_BYTES = 65_536


def encode_status_list(revoked: Iterable[int], size: int) -> dict[str, Any]:
    """The ``status_list`` claim of ``size`` one-bit entries, those at ``revoked`` set."""
    bits = bytearray((size + 7) // 8)
    for idx in revoked:
        bits[idx // 8] |= 1 << (idx % 8)
    lst = base64.urlsafe_b64encode(zlib.compress(bytes(bits), 9)).rstrip(b"=").decode()
    return {"bits": 1, "lst": lst}


def decode_status_list(value: object) -> bytes:
    """The bytes of a ``status_list`` claim, or :class:`ValueError` naming what is wrong."""
    if not isinstance(value, dict) or value.get("bits") != 1:
        raise ValueError("status_list.bits must be 1")
    lst = value.get("lst")
    if not isinstance(lst, str) or "=" in lst:
        raise ValueError("status_list.lst must be unpadded base64url text")
    try:
        compressed = base64.urlsafe_b64decode(lst + "=" * (-len(lst) % 4))
        inflater = zlib.decompressobj()
        bits = inflater.decompress(compressed, MAX_LIST_BYTES)
    except (binascii.Error, zlib.error, ValueError):
        raise ValueError("status_list.lst is not base64url ZLIB data") from None
    if inflater.unconsumed_tail or not inflater.eof:
        raise ValueError("status_list.lst is too large or truncated")
    return bits


def status_at(bits: bytes, idx: int) -> bool:
    """Whether entry ``idx`` is set; an index beyond the list counts as set (revoked),
    never as valid."""
    if idx >= len(bits) * 8:
        return True
    return bool(bits[idx // 8] >> (idx % 8) & 1)
