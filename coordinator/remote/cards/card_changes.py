"""What a held card asks for beyond the registered one, as a diff an operator can review.

A card that changes what it asks for is held as pending (see
:mod:`coordinator.remote.cards.registry`); ``federation agents pending`` shows, for each held
card, what it would add and drop: interfaces, skills, the scopes each skill requires, and
whether its security schemes or requirements changed. The diff is computed from the two
cards' :func:`surface`, the same view that decided to hold it (:func:`only_narrows`).
"""

from __future__ import annotations

from typing import Any

from contracts import strict_json
from contracts.wire import AgentCard


def surface(card: AgentCard) -> dict[str, Any]:
    """The parts of a card that decide what we would send it and what it may ask for."""
    return {
        "interfaces": {
            (i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces
        },
        "skills": {
            skill.id: frozenset(
                scope
                for requirement in skill.security_requirements or []
                for listed in requirement.schemes.values()
                for scope in listed.list
            )
            for skill in card.skills
        },
        "schemes": _canonical(card.security_schemes),
        "requirements": _canonical(card.security_requirements),
    }


def _canonical(value: Any) -> bytes:
    if value is None:
        return b"null"
    if isinstance(value, dict):
        value = {
            k: v.model_dump(mode="json", by_alias=True, exclude_none=True) for k, v in value.items()
        }
    else:
        value = [v.model_dump(mode="json", by_alias=True, exclude_none=True) for v in value]
    return strict_json.dumps(value)


def only_narrows(old: AgentCard, new: AgentCard) -> bool:
    before, after = surface(old), surface(new)
    return (
        after["schemes"] == before["schemes"]
        and after["requirements"] == before["requirements"]
        and after["interfaces"] <= before["interfaces"]
        and all(
            skill in before["skills"] and scopes <= before["skills"][skill]
            for skill, scopes in after["skills"].items()
        )
    )


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
