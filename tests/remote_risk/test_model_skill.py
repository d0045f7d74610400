"""The model-backed risk skill: its facts are checked against the records before they leave."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from contracts.evidence import Finding, FindingStatus
from contracts.wire import SendMessageRequest, TaskState
from member_kit.server.agent import AgentHandler
from member_kit.server.jsonrpc import CallContext
from member_kit.tasks.memory import TaskStore
from remote_risk.risk.interpreter import (
    fact_problem,
    model_config_from_env,
    run_model_skill,
)
from remote_risk.risk.model import ModelConfig
from remote_risk.risk.skill import interpret_risk_policy
from remote_risk.service import RiskSkill
from tests.model_server import ModelServer, Step, completion, scripted_model
from tests.remote_risk.conftest import risk_input, user_message

SUMMARY = "Policy risk-policy-007 forbids refund execution; no privacy review is needed."


def answer(**changes: Any) -> Step:
    """A JSON-mode reply holding a Finding, with ``changes`` applied to the honest one."""
    finding: dict[str, Any] = {
        "status": "ok",
        "summary": SUMMARY,
        "facts": {"refund_execution_permitted": False, "privacy_review_required": False},
        "evidence_ids": ["risk-policy-007", "brief-001"],
    }
    finding.update(changes)
    return Step(completion(content=json.dumps(finding)))


def interpret(script: list[Step], case: str = "ok") -> tuple[Finding, ModelServer]:
    with scripted_model(script) as server:
        _, finding, _ = asyncio.run(run_model_skill(risk_input(case), server.risk_config()))
    return finding, server


def test_honest_answer_is_the_deterministic_finding_in_substance() -> None:
    """A model answer that matches the records passes with the same facts and sources."""
    finding, server = interpret([answer()])
    expected = interpret_risk_policy(risk_input("ok"))
    assert finding.status is FindingStatus.OK
    assert finding.facts == expected.facts
    assert finding.evidence_ids == expected.evidence_ids
    assert server.requests[0]["response_format"] == {"type": "json_object"}
    assert "private" not in json.dumps(server.requests[0]).lower()


@pytest.mark.parametrize(
    ("changes", "expected_problem"),
    [
        (
            {
                "facts": {
                    "refund_execution_permitted": False,
                    "privacy_review_required": False,
                    "participants": 200,
                }
            },
            "participants",
        ),
        (
            {
                "facts": {
                    "refund_execution_permitted": False,
                    "privacy_review_required": False,
                    "staff_requested": 200,
                }
            },
            "staff_requested",
        ),
        ({"facts": {"refund_execution_permitted": 0, "privacy_review_required": False}}, "0"),
        (
            {"facts": {"refund_execution_permitted": True, "privacy_review_required": False}},
            "refund",
        ),
        ({"facts": {"refund_execution_permitted": False}}, "privacy_review_required"),
        ({"evidence_ids": ["risk-policy-007", "audit-999"]}, "audit-999"),
        ({"summary": "Policy allows a pilot with 200 participants."}, "200"),
        ({"status": "needs_input"}, "needs_input"),
    ],
)
def test_invented_or_wrong_facts_give_a_failed_finding(
    changes: dict[str, Any], expected_problem: str
) -> None:
    """Invented figures, unknown sources, 0 for false or wrong booleans fail with a reason."""
    finding, _ = interpret([answer(**changes)])
    assert finding.status is FindingStatus.FAILED
    assert finding.error_code == "model_fact_mismatch"
    assert expected_problem in finding.summary
    assert finding.facts == {} and finding.evidence_ids == ()


def test_figures_from_the_records_may_be_cited() -> None:
    """A summary citing the brief's own staff figure and ids passes the figure check."""
    summary = "Policy risk-policy-007 forbids refunds for the 20-person pilot in brief-001."
    finding, _ = interpret(
        [
            answer(
                summary=summary,
                facts={
                    "refund_execution_permitted": False,
                    "privacy_review_required": False,
                    "staff_requested": 20,
                },
            )
        ]
    )
    assert finding.status is FindingStatus.OK and finding.summary == summary


def test_non_json_answer_is_failed() -> None:
    """Prose instead of a Finding object is a failed Finding, not a guess."""
    finding, _ = interpret([Step(completion(content="The policy looks fine to me."))])
    assert (finding.status, finding.error_code) == (FindingStatus.FAILED, "model_output_invalid")


def test_truncated_answer_is_failed_with_the_gateway_reason() -> None:
    """A reply cut off at the output limit gives a failed Finding with model_incomplete."""
    finding, _ = interpret(
        [Step(completion(content='{"status": "ok", "su', finish_reason="length"))]
    )
    assert (finding.status, finding.error_code) == (FindingStatus.FAILED, "model_incomplete")


def test_missing_record_never_reaches_the_model() -> None:
    """Without the policy the answer is needs_input, decided before any model request."""
    finding, server = interpret([answer()], case="missing")
    assert finding.status is FindingStatus.NEEDS_INPUT
    assert server.requests == []


def test_fact_problem_is_none_for_the_deterministic_finding() -> None:
    """The checker accepts exactly what the deterministic skill derives from the same records."""
    for case in ("ok", "conflict", "handoff"):
        records = risk_input(case)
        assert fact_problem(interpret_risk_policy(records), records) is None


def test_handler_uses_the_model_when_configured() -> None:
    """A handler given a model configuration reports the model's checked Finding as a task."""

    async def go(config: ModelConfig) -> tuple[str, dict[str, Any]]:
        handler = AgentHandler(TaskStore(10), RiskSkill(config))
        request = SendMessageRequest.model_validate({"message": user_message(risk_input("ok"))})
        response = await handler.send_message(request, CallContext(owner="tester"))
        task = response.task
        assert task is not None and task.artifacts
        data = task.artifacts[0].parts[0].data
        return task.status.state.value, data

    summary = "Policy risk-policy-007 forbids refund execution (checked by a model)."
    with scripted_model([answer(summary=summary)]) as server:
        state, data = asyncio.run(go(server.risk_config()))
    assert state == TaskState.COMPLETED.value and data["summary"] == summary
    assert len(server.requests) == 1


def test_remote_configuration_reads_its_own_prefix() -> None:
    """The risk service reads REMOTE_RISK_MODEL_*, not the coordinator's variables."""
    coordinator_only = {
        "FEDERATION_MODEL_BASE_URL": "http://127.0.0.1:9/v1",
        "FEDERATION_MODEL": "m",
        "FEDERATION_MODEL_API_KEY": "k",
    }
    assert model_config_from_env(coordinator_only) is None
    own = {
        key.replace("FEDERATION_MODEL", "REMOTE_RISK_MODEL"): v
        for key, v in coordinator_only.items()
    }
    config = model_config_from_env(own)
    assert config is not None and config.model == "m"
