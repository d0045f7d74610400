"""What a request asks for, as far as its delegation token must cover it.

The facts the hook (:mod:`.hook`) checks a token against: the skill a send names (and the
scopes the card lists for it), its handoff and attempt, whether it opens a task or
continues one, its tenant; the request's Bearer token; the handoff binding of a task it
continues; and the owner a grant's tasks are stored under. Raw params are read
defensively here: their shape is the JSON-RPC layer's to refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from contracts.grant import Grant, SkillAuthority
from contracts.wire import AgentCard, JSONObject
from member_kit import errors
from member_kit.tasks.record import task_owner
from member_kit.trust.verifier import DelegationDenied, DenialReason

SECURITY_SCHEME = "delegation"
SEND_MESSAGE = "SendMessage"
# Both may open a task, so both are checked as a send (one token, one task; the handoff).
SENDING_METHODS = frozenset({SEND_MESSAGE, "SendStreamingMessage"})


@dataclass(frozen=True)
class Asked:
    """The facts of one request that a token must cover."""

    skill: SkillAuthority
    creates_task: bool = False
    handoff_id: str | None = None
    attempt: Any = None
    names_handoff: bool = False
    tenant: str | None = None
    continues: str | None = None


def skill_authorities(card: AgentCard) -> dict[str, SkillAuthority]:
    """Each skill of ``card`` with the scopes its ``delegation`` requirement lists.

    Every skill of this service only reads (it decides and changes nothing), so each is
    read-only: a token with an effect budget above 0 is refused.
    """
    skills: dict[str, SkillAuthority] = {}
    for skill in card.skills:
        scopes = {
            scope
            for requirement in skill.security_requirements or []
            for name, listed in requirement.schemes.items()
            if name == SECURITY_SCHEME
            for scope in listed.list
        }
        if not scopes:
            raise ValueError(f"skill {skill.id} declares no {SECURITY_SCHEME} scope")
        skills[skill.id] = SkillAuthority(id=skill.id, scopes=frozenset(scopes), read_only=True)
    if not skills:
        raise ValueError("the card declares no skill")
    return skills


def bearer_token(request: Request) -> str:
    """The RFC 6750 Bearer token of ``request``, or a ``token_missing`` denial."""
    values = request.headers.getlist("authorization")
    if len(values) > 1:
        raise DelegationDenied(DenialReason.TOKEN_MALFORMED, "more than one Authorization header")
    scheme, _, token = (values[0] if values else "").partition(" ")
    token = token.lstrip(" ")
    if scheme.lower() != "bearer" or not token:
        raise DelegationDenied(DenialReason.TOKEN_MISSING)
    return token


def asked(method: str, params: JSONObject, skills: Mapping[str, SkillAuthority]) -> Asked:
    """What ``method`` with ``params`` asks for; raw params are read defensively."""
    default = next(iter(skills.values()))
    tenant = params.get("tenant")
    tenant = tenant if isinstance(tenant, str) and tenant else None
    if method not in SENDING_METHODS:
        return Asked(skill=default, tenant=tenant)
    message = _object(params.get("message"))
    metadata = _object(message.get("metadata"))
    skill_id = metadata.get("skillId", default.id)
    skill = skills.get(skill_id) if isinstance(skill_id, str) else None
    if skill is None:
        raise errors.InvalidParams(
            "params.message.metadata.skillId: this agent offers only " + ", ".join(sorted(skills))
        )
    handoff_id = metadata.get("handoffId")
    named = isinstance(handoff_id, str) and bool(handoff_id)
    task_id = message.get("taskId")
    return Asked(
        continues=task_id if isinstance(task_id, str) else None,
        skill=skill,
        creates_task=message.get("taskId") is None,
        handoff_id=handoff_id if named else None,
        attempt=metadata.get("attempt"),
        names_handoff=named,
        tenant=tenant,
    )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# The handoff binding a task was opened under (its metadata), or None when the owner has
# no such task (the operation then answers TaskNotFound itself).
TaskBinding = Callable[[str, str], Mapping[str, Any] | None]


def task_binding_of(get: Callable[[str, str], Any]) -> TaskBinding:
    """A :data:`TaskBinding` reading a task store's ``get(owner, task_id)``."""

    def binding(owner: str, task_id: str) -> Mapping[str, Any] | None:
        try:
            record = get(owner, task_id)
        except errors.TaskNotFound:
            return None
        metadata = getattr(record, "metadata", None)
        return metadata if isinstance(metadata, Mapping) else {}

    return binding


def owner_of(grant: Grant) -> str:
    """The task owner for a grant: its principal ``(iss, sub, tenant)`` and the handoff it
    is bound to, as a JSON array. Every task operation (get, list, cancel, subscribe,
    push configs, an idempotent resend) is scoped by owner, so a token for handoff H sees
    only the tasks opened under H: never another run's, nor another handoff's of its run."""
    return task_owner(grant.iss, grant.sub, grant.tenant, grant.handoff.id)
