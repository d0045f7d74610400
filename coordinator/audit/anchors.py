"""Trust anchors of a bundle check: the keys the reader holds, never the bundle's own.

A bundle names keys (``jwks``), but a bundle is written by the party it is about, so
those keys prove nothing. Its reader passes the coordinator's public key(s) as
``federation keys show`` prints them (a JWK or a JWK Set), and the key(s) of each remote
whose receipts it should accept. Every key is identified by the RFC 7638 thumbprint
computed from its material (:class:`~agent_cards.trusted.TrustedKeys`): a ``kid`` that
is not that thumbprint is refused, so no label can make one key pass for another.

:meth:`Anchors.of_bundle` is the explicit opposite, for a structure-only check: the
bundle's own keys, and a report that says nothing is proven.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_cards.jwk import KeyMaterialError
from agent_cards.trusted import TrustedKeys, VerificationKey
from contracts import strict_json
from coordinator.errors import LedgerError


@dataclass(frozen=True)
class Anchors:
    """The coordinator's keys (tree heads) and the remotes' keys (receipts)."""

    coordinator: TrustedKeys
    remotes: TrustedKeys
    anchored: bool = True

    @classmethod
    def of(
        cls, coordinator: Iterable[Mapping[str, Any]], remotes: Iterable[Mapping[str, Any]] = ()
    ) -> Anchors:
        """Anchors from documents, each a JWK or a JWK Set; ``anchor_invalid`` if one is
        not public signing keys whose kids (where stated) are their thumbprints."""
        return cls(_trusted(coordinator), _trusted(remotes))

    @classmethod
    def of_bundle(cls, jwks: Mapping[str, Any]) -> Anchors:
        """The bundle's own keys: a structure-only check that proves nothing."""
        keys = _trusted([jwks])
        return cls(keys, keys, anchored=False)

    def coordinator_jwks(self) -> dict[str, Any]:
        return self.coordinator.to_jwks()


def read_anchor(text: str | bytes) -> dict[str, Any]:
    """One anchor document (a JWK or a JWK Set) from its JSON text."""
    try:
        value = strict_json.loads(text)
    except ValueError as exc:
        raise LedgerError(f"a key file is not JSON: {exc}", "anchor_invalid") from None
    if not isinstance(value, dict):
        raise LedgerError("a key file must hold a JWK or a JWK Set", "anchor_invalid")
    return value


def _trusted(documents: Iterable[Mapping[str, Any]]) -> TrustedKeys:
    keys: dict[str, VerificationKey] = {}
    for document in documents:
        try:
            loaded = TrustedKeys.from_json(document)
        except (KeyMaterialError, ValueError, TypeError) as exc:
            raise LedgerError(f"a trust anchor is not usable: {exc}", "anchor_invalid") from None
        keys.update((key.kid, key) for key in loaded)
    return TrustedKeys(keys.values())
