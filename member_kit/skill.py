"""What a team brings to the kit: its skill, and the card that describes it.

The kit does everything the federation asks of a member (the token, the handoff binding,
task ownership, receipts, the decision log, keys, limits, the three bindings); a team
writes only a :class:`Skill`, which turns one task's input (the data part of the message
that opened it) into an :class:`Outcome`, and names its card document in a
:class:`Member`. remote_risk is such a member (:mod:`remote_risk.service`).

A skill is *immediate* when :meth:`Skill.run` answers at once, with no I/O: a blocking
send then does the work in the same write that opens the task. Otherwise the kit calls
:meth:`Skill.run_later` in the background, within the delegation token's lease and
budget. A skill that raises :class:`~member_kit.errors.SkillFailure` ends its task FAILED
with that failure's code; any other exception ends it FAILED with ``internal_error``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from contracts.grant import Budget
from contracts.wire import AgentCard, TaskState
from member_kit import errors

logger = logging.getLogger(__name__)
INTERNAL_FAILURE_CODE = "internal_error"


class Outcome(NamedTuple):
    """A task's end: COMPLETED (``data`` is the artifact's data part), INPUT_REQUIRED or
    FAILED (``data`` is the status message's data part); ``usage`` of a model, if any."""

    state: TaskState
    data: dict[str, Any]
    usage: dict[str, Any] | None = None


class Skill(Protocol):
    """One skill of a member's agent."""

    skill_id: str
    artifact_name: str
    artifact_description: str
    # What the data part must hold, for a refusal's message (e.g. " holding brief and ...").
    input_hint: str

    @property
    def immediate(self) -> bool:
        """:meth:`run` answers at once (no I/O, no waiting)."""
        ...

    @property
    def needs_budget(self) -> bool:
        """A token must carry a model budget for this skill."""
        ...

    def input_problems(self, data: Any) -> list[str]:
        """Why ``data`` is no acceptable input (empty when it is acceptable)."""
        ...

    def run(self, data: Mapping[str, Any]) -> Outcome:
        """The outcome of an immediate run."""
        ...

    async def run_later(
        self, data: Mapping[str, Any], *, lease_expires_at: int | None, budget: Budget | None
    ) -> Outcome:
        """The outcome of a run in the background, done before ``lease_expires_at`` (the
        token's ``exp``) and within ``budget``; never raises."""
        ...

    def failure(self, code: str, message: str) -> dict[str, Any]:
        """The data part a FAILED task carries for a failure with this code."""
        ...


@dataclass(frozen=True)
class Member:
    """A member's agent: its skill and its card (unsigned, as served from a base URL)."""

    name: str
    skill: Skill
    card: Callable[[str], AgentCard]


def run_now(skill: Skill, data: Mapping[str, Any]) -> Outcome:
    """:meth:`Skill.run`, with a failure or an unexpected exception as a FAILED outcome."""
    try:
        return skill.run(data)
    except errors.SkillFailure as failure:
        return Outcome(TaskState.FAILED, skill.failure(failure.error_code, failure.message))
    except Exception:
        logger.exception("the skill %s raised unexpectedly", skill.skill_id)
        return internal_failure(skill)


def internal_failure(skill: Skill) -> Outcome:
    message = "The skill failed unexpectedly."
    return Outcome(TaskState.FAILED, skill.failure(INTERNAL_FAILURE_CODE, message))
