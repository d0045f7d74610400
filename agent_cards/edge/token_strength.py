"""The one rule every operator token of either service is held to before the service
starts: at least :data:`MIN_TOKEN_CHARS` characters, at most :data:`MAX_TOKEN_CHARS`, and
about :data:`MIN_BITS` bits by :func:`estimated_bits`. A weak token is refused
(``operator_token_weak``) with a sentence saying how to generate one, never echoed.

The estimate counts what a token carries, not how many distinct characters it has:

1. each character is worth at most ``log2(pool)`` bits, the pool being the classes the
   token draws from (26 lowercase, 26 uppercase, 10 digits, 32 for anything else);
2. the token is read as the steps from one character to the next, so that ``abcd`` and
   ``klmn`` are the same steps; a stretch of at least :data:`MIN_REPEAT` steps that
   repeats steps seen before (overlapping allowed: ``aaaa``, ``abab``, ``abcdefgh``, a
   half copied) is one piece, every other step a piece of its own;
3. the estimate is the pieces times the bits of one character.

A random 32-character ``secrets.token_urlsafe(24)`` carries about 190 bits by this count;
``abcdefgh12345678abcdefgh12345678`` about 36.
"""

from __future__ import annotations

import itertools
import math
import string

from agent_cards.edge.errors import WeakOperatorToken

MIN_TOKEN_CHARS = 32
MAX_TOKEN_CHARS = 4096
MIN_BITS = 128
MIN_REPEAT = 3
GENERATE = 'generate one with: python3 -c "import secrets; print(secrets.token_urlsafe(32))"'

_CLASSES = ((string.ascii_lowercase, 26), (string.ascii_uppercase, 26), (string.digits, 10))
_OTHER = 32
_CODE_POINTS = 0x110000


def weakness(token: str) -> str | None:
    """What makes ``token`` too weak to be an operator's secret, or None."""
    if len(token) > MAX_TOKEN_CHARS:
        return f"is longer than {MAX_TOKEN_CHARS} characters"
    if len(token) < MIN_TOKEN_CHARS or estimated_bits(token) < MIN_BITS:
        return (
            f"must be at least {MIN_TOKEN_CHARS} random characters carrying about "
            f"{MIN_BITS} bits (a repeated or patterned stretch counts once)"
        )
    return None


def check_strength(token: str, what: str) -> str:
    """``token``, or :class:`WeakOperatorToken` naming ``what`` (never the token)."""
    problem = weakness(token)
    if problem is not None:
        raise WeakOperatorToken(f"{what} {problem}; {GENERATE}")
    return token


def estimated_bits(token: str, enough: float = MIN_BITS) -> float:
    """The bits ``token`` carries by the count in the module docstring, counted until
    they reach ``enough`` (so a long token is not read further than the rule needs)."""
    if not token:
        return 0.0
    per_piece = math.log2(_pool(token))
    steps = _steps(token)
    bits, start = 0.0, 0
    while start < len(steps) and bits < enough:
        start += _repeat_length(steps, start) or 1
        bits += per_piece
    return bits


def _pool(token: str) -> int:
    pool = sum(size for chars, size in _CLASSES if any(char in chars for char in token))
    if any(not (char.isascii() and char.isalnum()) for char in token):
        pool += _OTHER
    return pool


def _steps(token: str) -> str:
    """The first character, then each step to the next one, as characters."""
    pairs = itertools.pairwise(token)
    return token[0] + "".join(chr((ord(b) - ord(a)) % _CODE_POINTS) for a, b in pairs)


def _repeat_length(steps: str, start: int) -> int:
    """The longest stretch from ``start`` that also begins before it, if long enough."""
    length = 0
    while start + length < len(steps):
        if steps.find(steps[start : start + length + 1], 0, start + length) == -1:
            break
        length += 1
    return length if length >= MIN_REPEAT else 0
