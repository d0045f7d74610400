"""The operator-token strength rule measures what a token carries, not how many distinct
characters it has.

``abcdefgh12345678abcdefgh12345678`` has 16 distinct characters in 32 and passed the old
rule (32 characters, 8 distinct), though its second half repeats its first. Now a stretch
that repeats an earlier one, or steps through the alphabet, counts once, and a token must
carry about 128 bits: random tokens pass, patterned ones are refused
(``operator_token_weak``), and every token this project's tests and docs use still passes.
"""

from __future__ import annotations

import base64
import random

import pytest

from agent_cards.edge.errors import WeakOperatorToken
from agent_cards.edge.token_strength import check_strength, estimated_bits, weakness
from coordinator.authority.operator_credential import check_token
from coordinator.errors import ConfigurationError

PATTERNED = [
    "abcdefgh12345678abcdefgh12345678",  # a half repeated
    "abcdefghijklmnopqrstuvwxyz012345",  # the alphabet in order
    "zyxwvutsrqponmlkjihgfedcba987654",  # and backwards
    "ab" * 16,
    "0123456789" * 4,
    "Aa1-" * 8,
    "acegikmoqsuwy02468acegikmoqsuwy0",  # a step of two, repeated
    "a" * 40,
    "password-password-password-password",
]
# Every operator token the tests, the demo and the docs configure (not the wrong ones
# they present): each must start a service.
PROJECT_TOKENS = [
    "operator-token-for-tests-0123456789",
    "operator-token-for-tests-0123456789abcdef",
    "audit-operator-token-for-tests-0123456789",
    "audit-token-for-tests-0123456789abcdef",
    "metrics-token-for-tests-0123456789abcdef",
    "metrics-token-for-tests-0123456789",
    "metrics-token-for-tests-5555555555",
    "console-operator-token-0123456789",
    "remote-risk-audit-operator-token",
]


def _random_tokens(count: int, size: int, seed: int) -> list[str]:
    """What ``secrets.token_urlsafe(size)`` prints, from a seeded generator."""
    rng = random.Random(seed)
    made = (base64.urlsafe_b64encode(rng.randbytes(size)) for _ in range(count))
    return [token.rstrip(b"=").decode() for token in made]


@pytest.mark.parametrize("token", PATTERNED)
def test_a_repeated_or_patterned_token_is_weak(token: str) -> None:
    assert estimated_bits(token) < 128
    with pytest.raises(WeakOperatorToken) as refused:
        check_strength(token, "the audit token")
    assert refused.value.reason == "operator_token_weak"
    assert token not in str(refused.value)
    with pytest.raises(ConfigurationError) as refused_at_start:
        check_token(token)
    assert refused_at_start.value.reason == "operator_token_weak"


@pytest.mark.parametrize("size", [24, 32])
def test_random_tokens_are_strong(size: int) -> None:
    for token in _random_tokens(2000, size, seed=size):
        assert weakness(token) is None, token


def test_random_hex_tokens_are_strong() -> None:
    rng = random.Random(16)
    for _ in range(2000):
        token = rng.randbytes(16).hex()
        assert weakness(token) is None, token


@pytest.mark.parametrize("token", PROJECT_TOKENS)
def test_every_token_the_project_configures_is_strong(token: str) -> None:
    assert weakness(token) is None
    assert check_token(token) == token


def test_a_token_of_the_longest_allowed_length_is_measured_at_once() -> None:
    """4,096 characters (the cap) of one repeated character: weak, and measured in one
    pass over the text (the estimate stops counting at what the rule needs)."""
    assert weakness("a" * 4096) is not None
    assert weakness("a" * 4097) is not None
    assert weakness(_random_tokens(1, 3072, seed=1)[0]) is None
