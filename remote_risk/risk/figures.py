"""Figures in generated prose, in every common spelling, reduced to what they claim.

:func:`figures` finds each figure a text states and says whether it is a plain count and
what its value is, so the interpreter can check it against the records:

* digits with separators and decimals: ``20``, ``2,500,000``, ``2_500``, ``2.5``;
* exponents: ``1e6``, ``2.5E+3``;
* magnitude suffixes and words: ``5k``, ``2.5M``, ``3bn``, ``4 thousand``, ``1.2 million``;
* currency prefixes, with or without a space: ``$5``, ``€20``, ``USD2500000``, ``EUR 3``;
* multipliers and shares: ``3x`` (or with a multiplication sign), ``20%``, ``20 percent``;
* number words: ``twenty``, ``twenty-five``, ``two hundred``, ``three million``.

A currency amount, a multiplier, a share, or digits glued to letters (``5kg``, ``3rd``)
are not plain counts: the records hold only counts, so such a figure never matches one.
A lone ``one`` (or ``a``) is ordinary prose and is not counted as a figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CURRENCY = r"(?P<cur>[$€£¥]\s?|\b(?:USD|EUR|GBP|JPY|CHF|CAD|AUD)\s?)?"
_NUMBER = r"(?P<num>\d[\d,_']*(?:\.\d+)?|\.\d+)(?:[eE](?P<exp>[+-]?\d+))?"
_SUFFIX = (
    r"(?:\s?(?P<suf>%|\u00d7|percent\b|per\s?cent\b|thousand\b|million\b|billion\b|trillion\b"
    r"|hundred\b|k\b|K\b|m\b|M\b|mn\b|bn\b|b\b|B\b|x\b|X\b))?"
)
_DIGIT_FIGURE = re.compile(_CURRENCY + _NUMBER + _SUFFIX + r"(?P<glued>[^\W\d_]+)?")

_MAGNITUDE = {
    "hundred": 100,
    "thousand": 1_000,
    "k": 1_000,
    "million": 1_000_000,
    "m": 1_000_000,
    "mn": 1_000_000,
    "billion": 1_000_000_000,
    "bn": 1_000_000_000,
    "b": 1_000_000_000,
    "trillion": 1_000_000_000_000,
}
MULTIPLICATION_SIGN = "\N{MULTIPLICATION SIGN}"
_NOT_COUNTS = frozenset({"%", "percent", "per cent", "x", MULTIPLICATION_SIGN})

_SMALL = {
    word: value
    for value, word in enumerate(
        (
            *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
            *("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"),
            *("seventeen", "eighteen", "nineteen"),
        )
    )
}
_TENS = {
    word: 10 * (index + 2)
    for index, word in enumerate(
        ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
    )
}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 10**6, "billion": 10**9}
_NUMBER_WORD = "|".join(sorted([*_SMALL, *_TENS, *_SCALES, "dozen"], key=len, reverse=True))
_WORD_FIGURE = re.compile(
    rf"\b(?:{_NUMBER_WORD})(?:(?:\s+|-|\s+and\s+)(?:{_NUMBER_WORD}))*\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Figure:
    """One figure as written, its value, and whether it is a plain count."""

    text: str
    value: float
    plain: bool


def figures(text: str) -> list[Figure]:
    """Every figure ``text`` states, digits first, then number words."""
    found = [_digit_figure(match) for match in _DIGIT_FIGURE.finditer(text)]
    found.extend(
        figure
        for match in _WORD_FIGURE.finditer(text)
        if (figure := _word_figure(match.group(0))) is not None
    )
    return found


def _digit_figure(match: re.Match[str]) -> Figure:
    digits = match.group("num").rstrip(",_'").replace(",", "").replace("_", "").replace("'", "")
    value = float(digits)
    if match.group("exp"):
        value *= 10.0 ** min(int(match.group("exp")), 300)
    suffix = (match.group("suf") or "").lower()
    suffix = re.sub(r"\s+", " ", suffix)
    value *= _MAGNITUDE.get(suffix, 1)
    plain = not (match.group("cur") or match.group("glued") or suffix in _NOT_COUNTS)
    return Figure(match.group(0).strip(), value, plain)


def _word_figure(phrase: str) -> Figure | None:
    words = [w for w in re.split(r"[\s-]+", phrase.lower()) if w and w != "and"]
    if words == ["one"]:
        return None
    total, current = 0, 0
    for word in words:
        if word in _SMALL:
            current += _SMALL[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "dozen":
            current = (current or 1) * 12
        elif word == "hundred":
            current = (current or 1) * 100
        else:
            total += (current or 1) * _SCALES[word]
            current = 0
    return Figure(phrase, float(total + current), True)


def stray_figures(text: str, allowed: set[float]) -> list[str]:
    """The figures in ``text`` that are not plain counts equal to one of ``allowed``."""
    return [f.text for f in figures(text) if not (f.plain and f.value in allowed)]
