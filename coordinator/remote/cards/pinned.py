"""The pinned keys of a registered agent, parsed once per key set rather than per use.

A registered agent's pinned JWK Set is read on every handoff (its identity for the token's
audience, the keys a receipt and the remote's tree head verify with). Parsing it means
loading each public key and computing its RFC 7638 thumbprint; :func:`pinned_key_set`
does that once per distinct key set (its content, so a changed set is parsed afresh) and
hands out the same :class:`~agent_cards.trusted.TrustedKeys` after. A set that does not
parse is never kept: every use raises again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import orjson

from agent_cards.identity import identity_of
from agent_cards.trusted import TrustedKeys, VerificationKey

# Distinct key sets kept (one or two per registered agent); the least recently used go.
MAX_KEPT = 512
_kept: OrderedDict[bytes, TrustedKeys] = OrderedDict()
# The identity of each key of a kept set, by the key object itself (kept alive with it).
_identities: dict[int, tuple[VerificationKey, str]] = {}
# A set's content as its cache key: sorted keys, a datetime or a dataclass refused (as
# the standard library's encoder refuses them; written in C, the key costs a tenth).
_CONTENT = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def pinned_key_set(document: Mapping[str, Any]) -> TrustedKeys:
    """``TrustedKeys.from_json(document)``, from the parse of an equal document if one was
    made; raises as that does for a set that is not usable."""
    try:
        content = orjson.dumps(document, option=_CONTENT)
    except TypeError:
        return TrustedKeys.from_json(document)  # not JSON at all: refused there
    keys = _kept.get(content)
    if keys is not None:
        _kept.move_to_end(content)
        return keys
    keys = TrustedKeys.from_json(document)
    _kept[content] = keys
    _identities.update((id(key), (key, identity_of(key))) for key in keys)
    if len(_kept) > MAX_KEPT:
        for dropped in _kept.popitem(last=False)[1]:
            _identities.pop(id(dropped), None)
    return keys


def pinned_identity(key: VerificationKey) -> str:
    """:func:`~agent_cards.identity.identity_of` ``key``, computed once for a key of a
    kept set (any other key is computed on every call)."""
    known = _identities.get(id(key))
    if known is not None and known[0] is key:
        return known[1]
    return identity_of(key)
