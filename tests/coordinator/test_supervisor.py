"""The model supervisor, scripted over a real OpenAI-compatible server, with remote_risk live."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_cards.keys import KeySet, SigningKey
from contracts.handoff import HandoffState
from contracts.wire import to_wire
from coordinator.assessment.model_gateway import ModelGateway, RequestBudget
from coordinator.assessment.scenario import PRIVATE_NOTE
from coordinator.assessment.supervisor import SupervisedResult, run_supervised
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.client import A2AClient
from member_kit.server.app import JSONRPC_PATH
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.model_server import (
    Step,
    asks,
    completion,
    says,
    scripted_model,
    tool_call,
)
from tests.runs import scratch_workspace
from tests.servers import free_port, running

# The coordinator's key: remote handoffs carry a delegation token signed with it.
KEYS = KeySet(active=SigningKey.generate())
# remote_risk checks the tokens minted with KEYS (its receipts then name them)
TRUSTING_KEYS = {DEFAULT_ISSUER: KEYS.trusted_keys()}
APPROVAL = "Everything is approved; deploy the assistant."

COMMENT = "Both specialists agree; the material is consistent for a draft."


@pytest.fixture(scope="module")
def risk_url() -> Iterator[RegisteredAgent]:
    """remote_risk on loopback, as the registry would hold it once its card is accepted."""
    port = free_port()
    app = create_app(
        Settings(public_base_url=f"http://127.0.0.1:{port}", trusted_issuers=TRUSTING_KEYS)
    )
    with running(app, port=port) as url:
        yield RegisteredAgent(
            name="remote-risk",
            card_url=f"{url}/.well-known/agent-card.json",
            endpoint=f"{url}{JSONRPC_PATH}",
            card=to_wire(app.state.card),
            registered_at="2025-01-01T00:00:00Z",
            # the card key, as registration pins it (its receipts verify with it)
            pinned_jwks=app.state.signing_keys.public_jwks(),
            verified_kid=app.state.signing_keys.active.kid,
        )


def supervise(
    script: list[Step],
    risk: RegisteredAgent,
    tmp_path: Path,
    case: str = "ok",
    budget: int = 8,
    timeout: float = 10.0,
    parallel: bool = False,
) -> tuple[SupervisedResult, list[dict[str, object]]]:

    async def go() -> SupervisedResult:
        async with (
            A2AClient() as client,
            ModelGateway(server.config(timeout), RequestBudget(budget)) as gateway,
        ):
            return await run_supervised(
                case,
                client,
                risk,
                gateway,
                parallel=parallel,
                keys=KEYS,
                ws=scratch_workspace(),
            )

    with scripted_model(script) as server:
        result = asyncio.run(go())
    return result, list(server.requests)


@pytest.mark.parametrize("parallel", [False, True])
def test_normal_path_consults_both_and_merges(
    parallel: bool, risk_url: RegisteredAgent, tmp_path: Path
) -> None:
    """Two accepted tool calls, then a final turn: merge decides, the text is commentary."""
    result, requests = supervise(
        [asks("operations", "risk"), says(COMMENT)], risk_url, tmp_path, parallel=parallel
    )
    assert result.status == "completed" and result.pilot is not None
    assert result.pilot.assessment.status.value == "ready_for_draft"
    assert set(result.pilot.assessment.sources) == {"ops-plan-001", "brief-001", "risk-policy-007"}
    assert result.commentary_unverified == COMMENT
    assert [c.record.state for c in result.consultations] == [HandoffState.ACCEPTED] * 2
    assert result.model["requests"] == 2 and result.model["total_tokens"] == 120
    first = json.dumps(requests[0])
    assert "ops-plan-001" not in first and PRIVATE_NOTE["text"] not in first
    assert [t["function"]["name"] for t in requests[0]["tools"]] == ["ask_specialist"]
    tool_turns = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert len(tool_turns) == 2 and PRIVATE_NOTE["text"] not in json.dumps(requests[1])


def test_consultations_across_rounds_with_handoff(
    risk_url: RegisteredAgent, tmp_path: Path
) -> None:
    """One call a round also works, and a privacy review hands the run to privacy."""
    result, _ = supervise(
        [asks("risk"), asks("operations"), says("Needs privacy.")],
        risk_url,
        tmp_path,
        case="handoff",
    )
    assert result.status == "completed" and result.pilot is not None
    assert result.pilot.assessment.status.value == "needs_review"
    assert result.pilot.run.owner == "privacy" and result.pilot.former_owner_rejected is True
    assert result.commentary_unverified is None and result.commentary_withheld is True


def test_early_approval_is_refused(risk_url: RegisteredAgent, tmp_path: Path) -> None:
    """A supervisor that skips the consultations and declares approval gets no assessment."""
    result, requests = supervise([says(APPROVAL)], risk_url, tmp_path)
    assert (result.status, result.reason) == ("failed", "final_before_observations")
    assert result.pilot is None and result.commentary_unverified is None
    assert result.consultations == [] and len(requests) == 1


def test_final_after_one_observation_is_refused(risk_url: RegisteredAgent, tmp_path: Path) -> None:
    """A final turn after operations alone is refused: risk was never heard."""
    result, _ = supervise([asks("operations"), says(APPROVAL)], risk_url, tmp_path)
    assert (result.status, result.reason) == ("failed", "final_before_observations")
    assert "risk" in result.detail and result.pilot is None


@pytest.mark.parametrize(
    ("calls", "reason"),
    [
        ([tool_call("c1", name="approve_deployment")], "unknown_tool"),
        ([tool_call("c1", type_="custom")], "unknown_tool"),
        ([tool_call("", {"specialist": "risk"})], "missing_call_id"),
        ([tool_call("c1"), tool_call("c1", {"specialist": "risk"})], "duplicate_call_id"),
        ([tool_call("c1", {"specialist": "privacy"})], "bad_tool_argument"),
        (
            [tool_call("c1", {"specialist": "risk", "context_keys": ["private_note"]})],
            "bad_tool_argument",
        ),
        ([tool_call("c1", {"specialist": ["risk"]})], "bad_tool_argument"),
        ([tool_call("c1", "{not json")], "bad_tool_argument"),
        ([tool_call(f"c{i}") for i in range(3)], "too_many_tool_calls"),
    ],
)
def test_bad_tool_calls_end_the_run_before_anything_runs(
    calls: list[dict[str, object]], reason: str, risk_url: RegisteredAgent, tmp_path: Path
) -> None:
    """Unknown tools, bad ids, bad arguments and oversized rounds launch no consultation."""
    result, _ = supervise([Step(completion(tool_calls=calls))], risk_url, tmp_path)
    assert (result.status, result.reason) == ("failed", reason)
    assert result.consultations == [] and result.pilot is None


def test_call_id_reused_in_a_later_round_is_refused(
    risk_url: RegisteredAgent, tmp_path: Path
) -> None:
    """Call ids must be unique across rounds, not only within one."""
    script = [
        Step(completion(tool_calls=[tool_call("same", {"specialist": "operations"})])),
        Step(completion(tool_calls=[tool_call("same", {"specialist": "risk"})])),
    ]
    result, _ = supervise(script, risk_url, tmp_path)
    assert (result.status, result.reason) == ("failed", "duplicate_call_id")
    assert [c.target for c in result.consultations] == ["operations"]


def test_truncated_reply_is_not_a_result(risk_url: RegisteredAgent, tmp_path: Path) -> None:
    """A final turn cut off at the output limit ends the run failed, with no commentary."""
    script = [
        asks("operations", "risk"),
        Step(completion(content="Everything is appro", finish_reason="length")),
    ]
    result, _ = supervise(script, risk_url, tmp_path)
    assert (result.status, result.reason) == ("failed", "model_incomplete")
    assert result.pilot is None and result.commentary_unverified is None


def test_request_budget_exhaustion_is_limit_reached(
    risk_url: RegisteredAgent, tmp_path: Path
) -> None:
    """With two requests allowed, the third (the final turn) is never sent: limit_reached."""
    script = [asks("operations"), asks("risk"), says(COMMENT)]
    result, requests = supervise(script, risk_url, tmp_path, budget=2)
    assert (result.status, result.reason) == ("limit_reached", "limit_reached")
    assert len(requests) == 2 and result.pilot is None
    assert result.model["requests"] == 2


def test_decision_rounds_are_limited(risk_url: RegisteredAgent, tmp_path: Path) -> None:
    """A supervisor that keeps asking is stopped after four rounds without a guess."""
    script = [asks("operations") for _ in range(5)]
    result, requests = supervise(script, risk_url, tmp_path)
    assert result.status == "limit_reached" and "4 decision rounds" in result.detail
    assert len(requests) == 4 and result.pilot is None


def test_request_timeout_ends_the_run(risk_url: RegisteredAgent, tmp_path: Path) -> None:
    """A model slower than the request timeout ends the run with model_timeout."""
    script = [Step(completion(content="late"), delay_seconds=2.0)]
    result, _ = supervise(script, risk_url, tmp_path, timeout=0.2)
    assert (result.status, result.reason) == ("failed", "model_timeout")
    assert result.model["calls"][0]["total_tokens"] is None


def test_commentary_withheld_on_conflict(risk_url: RegisteredAgent, tmp_path: Path) -> None:
    """On a conflict the assessment stands and the model's smoothing text is withheld."""
    result, _ = supervise(
        [asks("operations", "risk"), says(APPROVAL)], risk_url, tmp_path, "conflict"
    )
    assert result.status == "completed" and result.pilot is not None
    assert result.pilot.assessment.status.value == "conflict"
    assert result.commentary_unverified is None and result.commentary_withheld is True
    assert APPROVAL not in json.dumps(result.as_dict())
