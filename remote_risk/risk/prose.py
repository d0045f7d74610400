"""A generated summary, fenced by the facts: contradictions fail, the unverifiable is dropped.

The check is deterministic and deliberately narrow. A summary is split into sentences and
each sentence into clauses (at ``;``, ``:``, ``,`` and words such as *but*, *because*,
*whereas*). A clause is about one checkable fact when it names its topic:

* *privacy review* -> ``privacy_review_required`` (this topic wins within a clause);
* *refund* -> ``refund_execution_permitted``;
* *real conversation(s)* -> ``uses_real_conversations``.

What a clause asserts about that fact is its polarity: negative when it holds an odd
number of negations (*not*, *no*, *never*, *without*, *forbids*, *prohibits*, *n't*, ...),
positive otherwise. A clause asserting the opposite of a fact is a contradiction
(:func:`contradiction`), and the Finding fails. :func:`fenced` keeps only the sentences
whose every clause makes an agreeing claim about exactly one fact; anything else (a
clause naming no fact or two, an instruction to the reader) is dropped, never passed on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Checked in order; the first topic found in a clause is what the clause is about.
TOPICS = (
    ("privacy_review_required", re.compile(r"\bprivacy[\s-]+reviews?\b", re.IGNORECASE)),
    ("refund_execution_permitted", re.compile(r"\brefunds?\b", re.IGNORECASE)),
    ("uses_real_conversations", re.compile(r"\breal[\s-]+conversations?\b", re.IGNORECASE)),
)
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|neither|nor|without|cannot|forbids?|forbidden|forbidding"
    r"|prohibits?|prohibited|disallows?|disallowed|bars?|barred|bans?|banned|excludes?"
    r"|excluded|den(?:y|ies|ied)|refuses?|refused|unnecessary|needless)\b|n't\b",
    re.IGNORECASE,
)
_CLAUSE_BREAK = re.compile(
    r"[;:,]|\b(?:but|whereas|while|although|though|because|since|however)\b", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Claim:
    """What one clause asserts: ``fact`` is ``asserted``; ``fact`` None: no single fact."""

    clause: str
    fact: str | None
    asserted: bool


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def claims(sentence: str) -> list[Claim]:
    """One claim per non-empty clause of ``sentence``."""
    clauses = [c.strip() for c in _CLAUSE_BREAK.split(sentence) if c and c.strip(" .!?()")]
    return [_claim(clause) for clause in clauses]


def _claim(clause: str) -> Claim:
    named = [fact for fact, pattern in TOPICS if pattern.search(clause)]
    if not named:
        return Claim(clause, None, True)
    if {"privacy_review_required", "refund_execution_permitted"} <= set(named):
        return Claim(clause, None, True)  # which of the two a negation belongs to is unclear
    negations = len(_NEGATION.findall(clause))
    return Claim(clause, named[0], negations % 2 == 0)


def contradiction(summary: str, facts: Mapping[str, Any]) -> str | None:
    """The first clause of ``summary`` that asserts the opposite of a boolean fact."""
    for sentence in sentences(summary):
        for claim in claims(sentence):
            if claim.fact is None or type(facts.get(claim.fact)) is not bool:
                continue
            if claim.asserted != facts[claim.fact]:
                return (
                    f"the summary says {claim.fact} is {str(claim.asserted).lower()} "
                    f"({claim.clause!r}), the records say {str(facts[claim.fact]).lower()}"
                )
    return None


def fenced(summary: str, facts: Mapping[str, Any]) -> str:
    """The sentences of ``summary`` whose every clause agrees with one fact; may be ''."""
    kept = [s for s in sentences(summary) if _verified(s, facts)]
    return " ".join(kept)


def _verified(sentence: str, facts: Mapping[str, Any]) -> bool:
    found = claims(sentence)
    return bool(found) and all(
        claim.fact is not None
        and type(facts.get(claim.fact)) is bool
        and claim.asserted == facts[claim.fact]
        for claim in found
    )
