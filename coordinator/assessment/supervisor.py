"""A model as supervisor: it chooses which specialist to ask, the host keeps every rule.

The supervisor gets only the public goal and one tool, ``ask_specialist``, whose single
argument names a specialist allowed for this run. It cannot choose the caller, the
identity, the context keys, the assignment text or the next owner. The host checks every
tool call itself before anything runs:

* the call is a ``function`` call named ``ask_specialist``;
* its arguments are a JSON object with exactly ``specialist``, naming an allowed one;
* its id is a non-empty string, unique across every round of the run;
* a round holds at most ``max_calls_per_round`` calls; the run at most ``max_rounds``;
* the run ends by ``run_deadline_seconds``: each model request gets only the time left
  (its total deadline), each consultation's lease ends by then too, and a round that
  would start after it ends the run ``limit_reached`` (``run_deadline_exceeded``).

A rejected batch launches nothing and ends the run. Accepted calls go through the same
handoff functions as the deterministic pilot
(:func:`~coordinator.assessment.pilot.run_local_handoff` and
:func:`~coordinator.assessment.pilot.consult_risk`), under the run's delegation budget.

Facts first, prose fenced: what the model sees of a consultation is the finding's status,
validated facts, evidence ids and error code, never the specialist's summary text (a
remote's summary is generated prose that may carry instructions). A final turn is
accepted only once both operations and risk have been consulted. The decision is then
:func:`~contracts.evidence.merge` over their findings, never the model's words; a privacy
review hands the run to the privacy specialist as in the pilot. The model's closing text
is kept as unverified commentary, cut to ``max_commentary_chars``, when the assessment
is ``ready_for_draft`` and withheld otherwise.

A run ends ``completed`` (with an assessment), ``limit_reached`` (request budget, decision
rounds or delegation budget) or ``failed`` (a rejected tool call, an early final turn, a
reply the gateway did not accept), with the error's stable reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_cards.keys import KeySet
from contracts import strict_json
from contracts.evidence import AssessmentStatus, Finding, FindingStatus, merge
from coordinator.assessment import scenario, specialists
from coordinator.assessment.model_gateway import (
    LimitReached,
    ModelGateway,
    ModelReply,
    ModelTimeout,
    ToolCall,
)
from coordinator.assessment.pilot import (
    COORDINATOR,
    Consultation,
    PilotResult,
    consult_risk,
    hand_off_to_privacy,
    run_local_handoff,
)
from coordinator.assessment.run_budget import LocalRequests, authority_for
from coordinator.assessment.run_clock import RunClock
from coordinator.authority.delegator import DEFAULT_ISSUER, Delegator, RunAuthority
from coordinator.dispatch.attempt.driver import WaitPolicy
from coordinator.errors import BudgetExceeded, FederationError
from coordinator.handoff.projection import project_context
from coordinator.handoff.run import Run, start_run
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.client import A2AClient
from coordinator.workspace import Workspace

ROLE = "supervisor"
TOOL_NAME = "ask_specialist"
SPECIALISTS = ("operations", "risk")
# The observations the assessment rests on: a final turn before both is refused.
REQUIRED_OBSERVATIONS = ("operations", "risk")

INSTRUCTIONS = """\
You coordinate a pilot assessment. You cannot read the records yourself; specialists can.
Use the ask_specialist tool to consult specialists by name. When you have heard from the
specialists you need, reply with a short explanation for a colleague. Your reply is
commentary only: the application decides the assessment from the specialists' findings."""


class ToolCallRejected(FederationError):
    default_reason = "tool_call_rejected"


class PrematureFinal(FederationError):
    default_reason = "final_before_observations"


@dataclass(frozen=True)
class SupervisorLimits:
    max_rounds: int = 4
    max_calls_per_round: int = 2
    run_deadline_seconds: float = 120.0
    max_commentary_chars: int = 2000


@dataclass(frozen=True)
class AcceptedCall:
    round: int
    call_id: str
    specialist: str


@dataclass
class SupervisedResult:
    """One supervised run: how it ended, the trace, and the decision if there is one."""

    case: str
    status: str
    reason: str | None
    detail: str
    consultations: list[Consultation]
    calls: list[AcceptedCall]
    rounds: int
    model: dict[str, Any]
    pilot: PilotResult | None = None
    commentary_unverified: str | None = None
    commentary_withheld: bool = False
    commentary_truncated: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "status": self.status,
            "reason": self.reason,
            "detail": self.detail,
            "rounds": self.rounds,
            "tool_calls": [vars(call) for call in self.calls],
            "result": self.pilot.as_dict() if self.pilot else None,
            "clarification": self.pilot.clarification if self.pilot else None,
            "model_commentary_unverified": self.commentary_unverified,
            "commentary_withheld": self.commentary_withheld,
            "commentary_truncated": self.commentary_truncated,
            "handoffs": [c.as_dict() for c in self.consultations],
            "model": self.model,
        }


def tool_schema(allowed: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Ask one specialist for its finding on the pilot proposal.",
            "parameters": {
                "type": "object",
                "properties": {"specialist": {"type": "string", "enum": list(allowed)}},
                "required": ["specialist"],
                "additionalProperties": False,
            },
        },
    }


def check_tool_calls(
    calls: Sequence[ToolCall], allowed: Sequence[str], seen_ids: set[str], max_calls: int
) -> list[tuple[str, str]]:
    """``(call id, specialist)`` for each call, or ToolCallRejected for the whole batch."""
    if len(calls) > max_calls:
        raise ToolCallRejected(
            f"{len(calls)} tool calls in one round; at most {max_calls}", "too_many_tool_calls"
        )
    checked: list[tuple[str, str]] = []
    batch_ids: set[str] = set()
    for call in calls:
        if call.type != "function" or call.name != TOOL_NAME:
            raise ToolCallRejected(f"unknown tool {call.name!r} ({call.type})", "unknown_tool")
        if not isinstance(call.id, str) or not call.id:
            raise ToolCallRejected("a tool call has no id", "missing_call_id")
        if call.id in seen_ids or call.id in batch_ids:
            raise ToolCallRejected(f"tool call id {call.id!r} was used before", "duplicate_call_id")
        batch_ids.add(call.id)
        checked.append((call.id, _specialist(call.arguments, allowed)))
    return checked


def _specialist(arguments: object, allowed: Sequence[str]) -> str:
    try:
        value = strict_json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        value = None
    if not isinstance(value, dict) or set(value) != {"specialist"}:
        raise ToolCallRejected(
            'arguments must be exactly {"specialist": <name>}', "bad_tool_argument"
        )
    name = value["specialist"]
    if not isinstance(name, str) or name not in allowed:
        raise ToolCallRejected(
            f"specialist must be one of {', '.join(allowed)}", "bad_tool_argument"
        )
    return name


class _Host:
    """The side of the loop the model never controls: projection, dispatch, the decision."""

    def __init__(
        self,
        case: str,
        client: A2AClient,
        risk: RegisteredAgent,
        wait: WaitPolicy,
        parallel: bool,
        delegator: Delegator | None,
        run: Run,
    ) -> None:
        self.case = case
        self.context = scenario.context_for(case)
        self.client, self.risk, self.wait = client, risk, wait
        self.parallel = parallel
        self.delegator = delegator
        self.run = run
        self.consultations: list[Consultation] = []
        self.latest: dict[str, Consultation] = {}

    async def consult(self, names: Sequence[str], clock: RunClock) -> list[Consultation]:
        self.run.reserve_delegations(COORDINATOR, len(names))
        if self.parallel:
            done = list(await asyncio.gather(*(self._ask(name, clock) for name in names)))
        else:
            done = [await self._ask(name, clock) for name in names]
        for name, consultation in zip(names, done, strict=True):
            self.consultations.append(consultation)
            self.latest[name] = consultation
        return done

    async def _ask(self, name: str, clock: RunClock) -> Consultation:
        view = project_context(self.context, scenario.CONTEXT_KEYS[name])
        if name == "operations":
            return run_local_handoff(self.run, name, specialists.operations, view)
        # The consultation's lease ends by the run's deadline.
        lease = min(self.wait.deadline_seconds, clock.check())
        wait = dataclasses.replace(self.wait, deadline_seconds=lease)
        return await consult_risk(self.run, self.client, self.risk, view, wait, self.delegator)

    def decide(self) -> PilotResult:
        missing = [name for name in REQUIRED_OBSERVATIONS if name not in self.latest]
        if missing:
            raise PrematureFinal(
                f"final turn before the observations the assessment needs: {', '.join(missing)}"
            )
        named = [(name, _finding(self.latest[name])) for name in REQUIRED_OBSERVATIONS]
        result = PilotResult(self.case, self.run, merge(named), self.consultations)
        if result.assessment.status is AssessmentStatus.NEEDS_REVIEW:
            hand_off_to_privacy(result, self.context, self.latest["risk"])
        return result


def _finding(consultation: Consultation) -> Finding:
    """A consultation whose return was not admitted counts as failed, never as absent."""
    if consultation.finding is not None:
        return consultation.finding
    return Finding(
        status=FindingStatus.FAILED,
        summary="The specialist's return was not admitted.",
        error_code=consultation.record.reason,
    )


def observation(specialist: str, consultation: Consultation) -> str:
    """What the model sees of one consultation: the admitted finding's validated facts and
    evidence ids, never its summary text (generated prose, possibly a remote's)."""
    finding = _finding(consultation)
    return json.dumps(
        {
            "specialist": specialist,
            "status": finding.status.value,
            "facts": finding.facts,
            "evidence_ids": list(finding.evidence_ids),
            "error_code": finding.error_code,
        },
        ensure_ascii=False,
    )


def _assistant_turn(reply: ModelReply, accepted: Sequence[tuple[str, str]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": reply.content,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": json.dumps({"specialist": name})},
            }
            for call_id, name in accepted
        ],
    }


async def run_supervised(
    case: str,
    client: A2AClient,
    risk: RegisteredAgent,
    gateway: ModelGateway,
    *,
    parallel: bool = False,
    wait: WaitPolicy | None = None,
    allowed: Sequence[str] = SPECIALISTS,
    limits: SupervisorLimits | None = None,
    keys: KeySet | None = None,
    authority: RunAuthority | None = None,
    issuer: str = DEFAULT_ISSUER,
    ws: Workspace,
) -> SupervisedResult:
    """Run ``case`` with the model choosing consultations inside the host's limits."""
    limits = limits or SupervisorLimits()
    run = start_run(ws, COORDINATOR, authority=authority_for(gateway, authority), kind="supervised")
    local = LocalRequests(run, gateway)
    delegator = Delegator(keys, run.authority, issuer, run.run_id) if keys is not None else None
    host = _Host(case, client, risk, wait or WaitPolicy(), parallel, delegator, run)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": f"Goal: {host.context['brief']['goal']}"},
    ]
    seen: set[str] = set()
    calls: list[AcceptedCall] = []
    rounds = 0

    def ended(status: str, error: FederationError | None, **extra: Any) -> SupervisedResult:
        close_supervised(run, case, status, error, extra.get("pilot"))
        return SupervisedResult(
            case,
            status,
            error.reason if error else None,
            str(error) if error else "final turn accepted after both observations",
            host.consultations,
            calls,
            rounds,
            gateway.report(),
            **extra,
        )

    clock = RunClock(limits.run_deadline_seconds)
    try:
        while True:
            if rounds >= limits.max_rounds:
                raise LimitReached(f"no final turn within {limits.max_rounds} decision rounds")
            left = clock.check()
            rounds += 1
            try:
                reply = await gateway.complete(
                    ROLE, messages, tools=[tool_schema(allowed)], seconds_left=left
                )
            finally:
                local.book()
            if not reply.tool_calls:
                pilot = host.decide()
                commentary = _commentary(pilot, reply, limits.max_commentary_chars)
                return ended("completed", None, pilot=pilot, **commentary)
            accepted = check_tool_calls(reply.tool_calls, allowed, seen, limits.max_calls_per_round)
            seen.update(call_id for call_id, _ in accepted)
            calls.extend(AcceptedCall(rounds, call_id, name) for call_id, name in accepted)
            done = await host.consult([name for _, name in accepted], clock)
            for consultation in done:
                if consultation.remote_model is not None:
                    usage = consultation.remote_model
                    gateway.record_remote(
                        consultation.target, usage["requests"] or 0, usage["total_tokens"]
                    )
            messages.append(_assistant_turn(reply, accepted))
            messages.extend(
                {"role": "tool", "tool_call_id": call_id, "content": observation(name, c)}
                for (call_id, name), c in zip(accepted, done, strict=True)
            )
    except (LimitReached, BudgetExceeded) as exc:
        return ended("limit_reached", exc)
    except ModelTimeout as exc:
        if clock.left() > 0:
            return ended("failed", exc)
        return ended("limit_reached", clock.expired("during a model request"))
    except FederationError as exc:
        return ended("failed", exc)


def close_supervised(
    run: Run, case: str, status: str, error: FederationError | None, pilot: PilotResult | None
) -> None:
    """The supervised run's disposition on the ledger and its document in the store."""
    reason = error.reason if error else None
    assessment = pilot.assessment.status.value if pilot is not None else None
    run.emit(
        "run.disposition",
        case=case,
        status=assessment or status,
        summary=f"supervised run {status}" + (f" ({reason})" if reason else ""),
        supervision=status,
        reason=reason,
        owner=run.owner,
    )
    run.save(run.document(case=case, supervision=status, reason=reason, assessment=assessment))


def _commentary(pilot: PilotResult, reply: ModelReply, max_chars: int) -> dict[str, Any]:
    text = (reply.content or "").strip()
    if pilot.assessment.status is not AssessmentStatus.READY_FOR_DRAFT:
        return {"commentary_withheld": bool(text)}
    if len(text) <= max_chars:
        return {"commentary_unverified": text}
    return {"commentary_unverified": text[:max_chars], "commentary_truncated": True}
