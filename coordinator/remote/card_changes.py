"""What a held card asks for beyond the registered one, as a diff an operator can review.

A card that changes what it asks for is held as pending (see
:mod:`coordinator.remote.registry`); ``federation agents pending`` shows, for each held
card, what it would add and drop: interfaces, skills, the scopes each skill requires, and
whether its security schemes or requirements changed. The diff is computed from the two
cards' :func:`~coordinator.remote.registry.surface`, the same view that decided to hold it.
"""

from __future__ import annotations

from typing import Any

from contracts.wire import AgentCard
from coordinator.remote.registry import surface


def card_diff(current: AgentCard, held: AgentCard) -> dict[str, Any]:
    """``held`` compared with ``current``: every list sorted, empty when nothing changed."""
    before, after = surface(current), surface(held)
    shared = sorted(set(before["skills"]) & set(after["skills"]))
    return {
        "interfaces_added": sorted(
            _interface(i) for i in after["interfaces"] - before["interfaces"]
        ),
        "interfaces_removed": sorted(
            _interface(i) for i in before["interfaces"] - after["interfaces"]
        ),
        "skills_added": sorted(set(after["skills"]) - set(before["skills"])),
        "skills_removed": sorted(set(before["skills"]) - set(after["skills"])),
        "scopes_added": {
            skill: sorted(scopes)
            for skill in sorted(after["skills"])
            if (scopes := after["skills"][skill] - before["skills"].get(skill, frozenset()))
        },
        "scopes_removed": {
            skill: sorted(scopes)
            for skill in shared
            if (scopes := before["skills"][skill] - after["skills"][skill])
        },
        "security_schemes_changed": before["schemes"] != after["schemes"],
        "security_requirements_changed": before["requirements"] != after["requirements"],
    }


def _interface(interface: tuple[str, str, str]) -> str:
    url, binding, version = interface
    return f"{binding} {version} {url}"
