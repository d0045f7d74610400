"""``federation evaluate``: the same examination for a single controller and the federation.

Three configurations get the same frozen cases, the same records, the same rules and the
same acceptance conditions:

* ``single_controller``: one process applies both rules itself (the operations rule and
  the risk policy rule), merges, and asks the privacy question itself; no specialist
  boundary is crossed;
* ``sequential``: operations (local handoff), then risk (remote_risk over loopback HTTP);
* ``parallel``: both at once.

With a model (``--model``), the risk policy is interpreted with the risk team's own
``REMOTE_RISK_MODEL_*`` settings in every configuration (when they are set): in-process
through the same checked skill and adapter for the single controller, and by remote_risk
for the federation, whose choice of specialists is then made by the supervisor model
(``FEDERATION_MODEL_*``).

A row passes when the assessment status and its source ids are the ones the case
requires, the privacy case carries a clarification question, and the synthetic private
note appears nowhere in what the run returns. Each row also records the measured elapsed
time, the calls that crossed a specialist boundary, the model requests and tokens made
for the run, the remote's reported ones included (tokens unknown stays null), and the
first error code a specialist reported.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from contracts.evidence import Assessment, AssessmentStatus, Finding, merge
from coordinator import loop as event_loop
from coordinator.assessment import scenario, specialists
from coordinator.assessment.demo import (
    DemoTrust,
    child_environment,
    prepare_trust,
    remote_risk_process,
)
from coordinator.assessment.evaluation_report import Row, document, summary
from coordinator.assessment.model_gateway import ModelConfig, ModelGateway, RequestBudget
from coordinator.assessment.pilot import RISK_SKILL, PilotResult, run_pilot
from coordinator.assessment.supervisor import SupervisedResult, run_supervised
from coordinator.errors import FederationError
from coordinator.handoff.projection import project_context
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace

if TYPE_CHECKING:  # the risk team's code is loaded only when the single controller runs
    from remote_risk.risk.model import ModelConfig as RiskModelConfig

__all__ = ["Row", "document", "examine", "run_evaluation", "single_controller", "summary"]
logger = logging.getLogger(__name__)
UNEXPECTED_ERROR = "unexpected_error"
CASES = ("ok", "missing", "conflict", "handoff")
CONFIGURATIONS = ("single_controller", "sequential", "parallel")
ALL_SOURCES = frozenset({"ops-plan-001", "brief-001", "risk-policy-007"})
EXPECTED: dict[str, tuple[str, frozenset[str]]] = {
    "ok": ("ready_for_draft", ALL_SOURCES),
    "missing": ("needs_input", frozenset({"ops-plan-001", "brief-001"})),
    "conflict": ("conflict", ALL_SOURCES),
    "handoff": ("needs_review", ALL_SOURCES),
}
PRIVATE_MARKERS = (scenario.PRIVATE_NOTE["id"], scenario.PRIVATE_NOTE["text"])


@dataclass(frozen=True)
class Outcome:
    """What one run returned, as the acceptance conditions read it."""

    status: str
    sources: tuple[str, ...]
    returned: dict[str, Any]
    boundary_calls: int
    model_requests: int = 0
    model_tokens: int | None = None
    reason: str | None = None


def accept(case: str, outcome: Outcome) -> tuple[bool, bool]:
    """``(passed, private note absent)`` for ``outcome`` under ``case``'s conditions."""
    status, sources = EXPECTED[case]
    absent = not any(marker in json.dumps(outcome.returned) for marker in PRIVATE_MARKERS)
    clarified = case != "handoff" or bool(outcome.returned.get("clarification"))
    passed = outcome.status == status and set(outcome.sources) == sources
    return passed and absent and clarified, absent


# --- the single controller -------------------------------------------------------------------


async def single_controller(case: str, risk_model: RiskModelConfig | None = None) -> Outcome:
    """Apply both rules in one process, merge, and ask the privacy question if needed.

    The risk rule uses the risk team's model settings (``REMOTE_RISK_MODEL_*``), as the
    federation's remote_risk does, so both configurations ask the same model for that role.
    """
    context = scenario.context_for(case)
    operations = specialists.operations(_inputs(context, "operations"))
    risk_records = _inputs(context, "risk")
    risk, report = await _risk_rule(risk_records, risk_model)
    assessment = merge([("operations", operations), ("risk", risk)])
    clarification = None
    if assessment.status is AssessmentStatus.NEEDS_REVIEW:
        question = specialists.privacy({"brief": context["brief"]})
        clarification = str(question.facts.get("clarification_question", ""))
    returned = _returned(assessment, [operations, risk], clarification)
    outcome = _outcome(assessment, returned, 0, report)
    return replace(outcome, reason=risk.error_code)


def _inputs(context: dict[str, Any], rule: str) -> dict[str, Any]:
    """The records a rule reads (the same keys the federation projects to its specialist)."""
    return project_context(context, scenario.CONTEXT_KEYS[rule])


async def _risk_rule(
    records: dict[str, Any], config: RiskModelConfig | None
) -> tuple[Finding, dict[str, Any] | None]:
    """The risk rule's Finding and, with a model, its request report."""
    from member_kit.errors import SkillFailure
    from remote_risk.risk import interpreter as model_skill
    from remote_risk.risk import skill
    from remote_risk.risk.model import RiskModel

    if config is None:
        try:
            return skill.interpret_risk_policy(records), None
        except SkillFailure as failure:
            return skill.failed_finding(failure), None
    async with RiskModel(config, config.requests_per_task) as model:
        try:
            finding = await model_skill.interpret_with_model(records, model)
        except SkillFailure as failure:
            finding = skill.failed_finding(failure)
        tokens = model.tokens
        total = None if not tokens or None in tokens else sum(t for t in tokens if t is not None)
        return finding, {"requests": model.requests, "total_tokens": total}


# --- the federation --------------------------------------------------------------------------


async def federated(
    case: str,
    client: A2AClient,
    risk: RegisteredAgent,
    trust: DemoTrust,
    *,
    parallel: bool,
    ws: Workspace,
    gateway: ModelGateway | None = None,
) -> Outcome:
    keys, issuer = trust.coordinator_keys, trust.issuer
    if gateway is None:
        pilot = await run_pilot(
            case, client, risk, parallel=parallel, keys=keys, issuer=issuer, ws=ws
        )
        pilot.run.save(pilot.run.document(case=case))
        return _from_pilot(pilot, None, None)
    run = await run_supervised(
        case, client, risk, gateway, parallel=parallel, keys=keys, issuer=issuer, ws=ws
    )
    if run.pilot is None:
        returned = {"status": run.status, "reason": run.reason, "detail": run.detail}
        calls = len(run.consultations)
        return Outcome(run.status, (), returned, calls, *_usage(run.model), run.reason)
    return _from_pilot(run.pilot, run.model, run.commentary_unverified)


def _from_pilot(
    pilot: PilotResult, report: dict[str, Any] | None, commentary: str | None
) -> Outcome:
    findings = [c.finding for c in pilot.consultations if c.finding is not None]
    returned = _returned(pilot.assessment, findings, pilot.clarification)
    returned["handoffs"] = [c.as_dict() for c in pilot.consultations]
    returned["model_commentary_unverified"] = commentary
    outcome = _outcome(pilot.assessment, returned, len(pilot.consultations), report)
    # The first error code a specialist reported, the remote's own included.
    reason = next((f.error_code for f in findings if f.error_code), None)
    return replace(outcome, reason=reason)


def _returned(
    assessment: Assessment, findings: Sequence[Finding], clarification: str | None
) -> dict[str, Any]:
    return {
        "assessment": assessment.model_dump(mode="json"),
        "findings": [finding.model_dump(mode="json") for finding in findings],
        "clarification": clarification,
    }


def _outcome(
    assessment: Assessment, returned: dict[str, Any], calls: int, report: dict[str, Any] | None
) -> Outcome:
    requests, tokens = _usage(report)
    return Outcome(assessment.status.value, assessment.sources, returned, calls, requests, tokens)


def _usage(report: dict[str, Any] | None) -> tuple[int, int | None]:
    if report is None:
        return 0, None
    return int(report["requests"]), report["total_tokens"]


async def register_risk(
    data: DataDir, ws: Workspace, client: A2AClient, base_url: str, trust: DemoTrust
) -> RegisteredAgent:
    """Register the remote_risk this command started, pinned to the keys it was given."""
    registry = Registry(data, ws.trail("operator"), ws.run_store())
    registration = await registry.register(
        client,
        base_url,
        expect_skill=RISK_SKILL,
        anchor=TrustAnchor(keys=trust.remote_pins),
        approve=True,
    )
    return registration.agent


async def model_demo(
    data: DataDir,
    ws: Workspace,
    base_url: str,
    trust: DemoTrust,
    model: ModelConfig,
    cases: Sequence[str],
    *,
    parallel: bool = False,
) -> list[SupervisedResult]:
    """``federation demo --model``: each case supervised by the model, one budget per run;
    a case that breaks is reported as failed and the remaining ones still run."""
    results = []
    async with A2AClient() as client:
        risk = await register_risk(data, ws, client, base_url, trust)
        for case in cases:
            async with ModelGateway(model, RequestBudget()) as gateway:
                try:
                    result = await run_supervised(
                        case,
                        client,
                        risk,
                        gateway,
                        parallel=parallel,
                        keys=trust.coordinator_keys,
                        issuer=trust.issuer,
                        ws=ws,
                    )
                except Exception as exc:  # run_supervised ends on every FederationError itself
                    logger.error("supervised case %s failed: %s", case, type(exc).__name__)
                    detail = f"the run raised {type(exc).__name__}"
                    result = SupervisedResult(
                        case, "failed", UNEXPECTED_ERROR, detail, [], [], 0, gateway.report()
                    )
                results.append(result)
    return results


# --- the examination -------------------------------------------------------------------------

Runner = Callable[[str, ModelGateway | None], Awaitable[Outcome]]


async def examine(
    data: DataDir,
    ws: Workspace,
    base_url: str,
    trust: DemoTrust,
    model: ModelConfig | None,
    repeat: int,
    risk_model: RiskModelConfig | None = None,
) -> list[Row]:
    """Every configuration on every case, ``repeat`` times, in a fixed order; a case that
    fails is a row with its reason, and the remaining ones still run."""
    async with A2AClient() as client:
        risk = await register_risk(data, ws, client, base_url, trust)

        def delegation(parallel: bool) -> Runner:
            async def run(case: str, gateway: ModelGateway | None) -> Outcome:
                return await federated(
                    case, client, risk, trust, parallel=parallel, ws=ws, gateway=gateway
                )

            return run

        async def alone(case: str, gateway: ModelGateway | None) -> Outcome:
            return await single_controller(case, risk_model)

        runners: dict[str, Runner] = {
            "single_controller": alone,
            "sequential": delegation(False),
            "parallel": delegation(True),
        }
        rows = []
        for configuration in CONFIGURATIONS:
            for case in CASES:
                for number in range(1, repeat + 1):
                    rows.append(await _row(configuration, case, number, runners, model))
        return rows


async def _row(
    configuration: str,
    case: str,
    number: int,
    runners: dict[str, Runner],
    model: ModelConfig | None,
) -> Row:
    started = time.perf_counter()
    try:
        outcome = await _run_one(runners[configuration], case, model)
    except FederationError as exc:
        outcome = _crashed(exc.reason, str(exc))
    except Exception as exc:  # one broken case must not lose the other rows
        logger.error("case %s under %s failed: %s", case, configuration, type(exc).__name__)
        outcome = _crashed(UNEXPECTED_ERROR, f"the run raised {type(exc).__name__}")
    elapsed_ms = (time.perf_counter() - started) * 1000
    passed, absent = accept(case, outcome)
    return Row(
        configuration,
        case,
        number,
        outcome.status,
        outcome.sources,
        absent,
        passed,
        round(elapsed_ms, 1),
        outcome.boundary_calls,
        outcome.model_requests,
        outcome.model_tokens,
        outcome.reason,
    )


async def _run_one(runner: Runner, case: str, model: ModelConfig | None) -> Outcome:
    if model is None:
        return await runner(case, None)
    async with ModelGateway(model, RequestBudget()) as gateway:
        return await runner(case, gateway)


def _crashed(reason: str, detail: str) -> Outcome:
    returned = {"status": "failed", "reason": reason, "detail": detail}
    return Outcome("failed", (), returned, 0, reason=reason)


def run_evaluation(
    data: DataDir, ws: Workspace, model: ModelConfig | None, repeat: int = 1
) -> list[Row]:
    """Start remote_risk on loopback, examine every configuration, stop it; every
    federated run is audited and stored in ``ws`` like any other.

    With ``model`` the risk role uses ``REMOTE_RISK_MODEL_*`` in every configuration (the
    child remote_risk and the single controller alike); without, no configuration does.
    """
    from remote_risk.risk.interpreter import model_config_from_env

    trust = prepare_trust(data)
    risk_model = model_config_from_env() if model is not None else None
    environment = child_environment(with_risk_model=risk_model is not None)
    with remote_risk_process(trust.remote_args, environment) as base_url:
        return event_loop.run(examine(data, ws, base_url, trust, model, repeat, risk_model))
