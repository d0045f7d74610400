"""Identifiers that sort by when they were made.

A row keyed by a random id lands on a page anywhere in its B-tree, so a commit of many
rows writes many pages; ids made one after another that sort together land where the
last ones did, one page a tree. Every id here starts with the Unix time in milliseconds
and ends with random bytes from the operating system, which keep it unguessable and
unique (two made in the same millisecond differ in those).
"""

from __future__ import annotations

import os
import time

__all__ = ["ordered_hex", "uuid7"]


def ordered_hex(random_bytes: int) -> str:
    """The time in milliseconds (12 hex digits), then ``random_bytes`` random bytes in hex."""
    milliseconds = time.time_ns() // 1_000_000
    return milliseconds.to_bytes(6, "big").hex() + os.urandom(random_bytes).hex()


def uuid7() -> str:
    """A time-ordered UUID (RFC 9562 version 7) in its usual text form: the time in
    milliseconds, then 74 random bits (:func:`ordered_hex` with its version and variant
    bits set)."""
    raw = bytearray.fromhex(ordered_hex(10))
    raw[6] = raw[6] & 0x0F | 0x70  # version 7
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 9562 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
