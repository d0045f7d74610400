"""Key successions in a proof bundle (docs/audit-bundle.md, steps 1 and 2.2).

A remote that rotates its card key signs, with the key it is pinned by, a statement that
names the next key (:mod:`agent_cards.transparency.succession`). A bundle carries the
statements that lead from the remotes' pinned keys to the keys that signed its receipts
(member ``successions``), so an auditor holding only the old key checks the later
receipts: each statement that verifies with a remote anchor, in that anchor's own name,
adds its successor to the remote anchors, until no statement adds anything. A statement
no anchor reached verifies vouches for nothing and is ignored; the coordinator's anchors
are never extended (a tree head is signed by a key the reader gave, or it proves nothing).

:func:`well_formed` is the member's shape, :func:`extended` the following,
:func:`vouching` what ``audit prove`` writes: the statements on a chain from a pinned key
to a receipt's key, and the pinned keys they start from.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from agent_cards.jwk import KeyMaterialError, b64url_decode
from agent_cards.transparency.statements import StatementInvalid, unverified_header
from agent_cards.transparency.succession import (
    MAX_SUCCESSIONS,
    SUCCESSIONS,
    followed,
    verify_succession,
)
from agent_cards.trusted import TrustedKeys

_PART = re.compile(r"[A-Za-z0-9_-]+")


def well_formed(bundle: Mapping[str, Any]) -> bool:
    """Step 1: ``successions`` is absent, or an array of at most 16 strings."""
    if SUCCESSIONS not in bundle:
        return True
    found = bundle[SUCCESSIONS]
    return (
        isinstance(found, list)
        and len(found) <= MAX_SUCCESSIONS
        and all(isinstance(jws, str) for jws in found)
    )


def carried(bundle: Mapping[str, Any]) -> list[str]:
    """The statements of a bundle :func:`well_formed` accepted ([] when absent)."""
    return list(bundle.get(SUCCESSIONS, []))


def extended(remotes: TrustedKeys, statements: Sequence[str]) -> tuple[TrustedKeys, int]:
    """Step 2.2: ``remotes`` and every key a chain of ``statements`` leads to from them,
    with the number of statements followed."""
    keys, used = followed(remotes, [jws for jws in statements if _compact(jws)])
    return keys, len(used)


def _compact(jws: str) -> bool:
    """Three parts, each non-empty unpadded canonical base64url: nothing else is read."""
    parts = jws.split(".")
    if len(parts) != 3 or not all(_PART.fullmatch(part) for part in parts):
        return False
    try:
        for part in parts:
            b64url_decode(part)
    except ValueError:
        return False
    return True


def vouching(
    pinned: Sequence[Mapping[str, Any]], statements: Sequence[str], kids: Collection[str]
) -> tuple[list[str], set[str]]:
    """The statements, in the order followed, on a chain from a ``pinned`` key to one of
    ``kids`` (the receipts' keys), and the kids of the keys those chains need: ``kids``
    and every signer of a statement kept."""
    try:
        start = TrustedKeys.from_json({"keys": list(pinned)}) if pinned else TrustedKeys()
    except (KeyMaterialError, ValueError, TypeError):
        return [], set(kids)
    distinct = [jws for jws in dict.fromkeys(statements) if _compact(jws)]
    reached, used = _follow_all(start, distinct)
    needed, kept = set(kids), []
    for jws in reversed(used):
        if _successor_kid(jws, reached) in needed:
            kept.append(jws)
            needed.add(str(unverified_header(jws)["kid"]))
    return kept[::-1], needed


def _follow_all(start: TrustedKeys, statements: list[str]) -> tuple[TrustedKeys, list[str]]:
    """:func:`followed` over any number of statements (a registry holds every agent's),
    at most :data:`MAX_SUCCESSIONS` at a time, until a pass follows none."""
    reached, used = start, []
    while True:
        pending = [jws for jws in statements if jws not in used]
        for at in range(0, len(pending), MAX_SUCCESSIONS):
            reached, more = followed(reached, pending[at : at + MAX_SUCCESSIONS])
            used += more
        if len(used) == len(statements) - len(pending):
            return reached, used


def _successor_kid(jws: str, reached: TrustedKeys) -> str | None:
    try:
        return verify_succession(jws, reached).kid
    except StatementInvalid:
        return None
