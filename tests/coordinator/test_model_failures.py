"""A hostile model never crashes a model role, the CLI, or the rest of demo/evaluate.

The model is :mod:`tests.adversarial_model` (raw HTTP on loopback). Every bad reply is a
ModelError with a stable reason, within the request's deadline plus a margin; through the
CLI, ``demo --model --case all --json`` and ``evaluate --model --json`` print one JSON
document with every case, each with its reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from coordinator.assessment.model_gateway import (
    ModelConfig,
    ModelError,
    ModelGateway,
    ModelReply,
    RequestBudget,
)
from remote_risk.risk.model import ModelConfig as RiskModelConfig
from tests.adversarial_model import (
    AdversarialModel,
    Reply,
    adversarial_model,
    answer_reply,
    broken_json,
    drip,
    gzip_bomb,
    gzipped,
    huge,
    json_reply,
    null_choice,
    null_message,
)
from tests.scenarios import Scenario

MESSAGES = [{"role": "user", "content": "Say something short."}]


def ask(reply: Reply, timeout: float = 10.0, **bounds: Any) -> tuple[Any, float, ModelGateway]:
    async def go(model: AdversarialModel) -> tuple[Any, ModelGateway]:
        async with ModelGateway(model.config(timeout, **bounds), RequestBudget(2)) as gateway:
            try:
                return await gateway.complete("tester", MESSAGES), gateway
            except ModelError as error:
                return error, gateway

    with adversarial_model([reply]) as model:
        started = time.monotonic()
        outcome, gateway = asyncio.run(go(model))
        return outcome, time.monotonic() - started, gateway


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (broken_json(), "model_reply_malformed"),
        (null_choice(), "model_reply_malformed"),
        (null_message(), "model_reply_malformed"),
        (json_reply({**json.loads(answer_reply("x").body), "choices": [{"message": 3}]}), None),
        (json_reply({"choices": [{"message": {"tool_calls": [None]}}]}), None),
        (Reply(b"not json at all", headers=(("Content-Type", "text/plain"),)), None),
        (json_reply({"choices": []}), "model_incomplete"),
        (json_reply({"error": "overloaded"}, status=503), "model_unavailable"),
        (gzipped(broken_json()), "model_reply_malformed"),
    ],
)
def test_malformed_replies_are_typed_model_errors(reply: Reply, reason: str | None) -> None:
    """Broken JSON under application/json, choices [null], message null: a reason, no crash."""
    error, _, gateway = ask(reply)
    assert isinstance(error, ModelError)
    assert error.reason == (reason or "model_reply_malformed")
    assert gateway.report()["calls"][0]["outcome"] == error.reason


def test_a_drip_ends_at_the_total_deadline() -> None:
    """Headers, then a byte a second: the request ends at its 2 s deadline, not 120 s."""
    error, elapsed, _ = ask(drip(1.0), timeout=2.0)
    assert isinstance(error, ModelError) and error.reason == "model_timeout"
    assert elapsed < 8


def test_the_caller_deadline_shortens_the_request() -> None:
    """seconds_left below the configured deadline bounds the request; none left sends none."""

    async def go(model: AdversarialModel) -> list[str]:
        reasons = []
        async with ModelGateway(model.config(30.0), RequestBudget(4)) as gateway:
            for seconds_left in (1.0, 0.0):
                try:
                    await gateway.complete("tester", MESSAGES, seconds_left=seconds_left)
                except ModelError as error:
                    reasons.append(error.reason)
        return reasons

    with adversarial_model([drip(1.0)]) as model:
        started = time.monotonic()
        assert asyncio.run(go(model)) == ["model_timeout", "model_timeout"]
        assert time.monotonic() - started < 8 and len(model.requests) == 1


def test_a_20_megabyte_reply_is_refused_at_the_cap() -> None:
    """20 MB never becomes commentary: model_reply_too_large at a 1 MB cap."""
    error, _, _ = ask(huge(20), max_reply_bytes=1_000_000)
    assert isinstance(error, ModelError) and error.reason == "model_reply_too_large"


def test_a_gzip_bomb_is_capped_on_its_decoded_size() -> None:
    """About 200 KB of gzip decoding to 200 MB stops at the cap, quickly."""
    error, elapsed, _ = ask(gzip_bomb(200), max_reply_bytes=1_000_000)
    assert isinstance(error, ModelError) and error.reason == "model_reply_too_large"
    assert elapsed < 10


def test_an_honest_gzipped_reply_is_read() -> None:
    reply, _, _ = ask(gzipped(answer_reply("Short answer.")))
    assert isinstance(reply, ModelReply) and reply.content == "Short answer."


def test_the_request_asks_for_no_compression() -> None:
    with adversarial_model([answer_reply("ok")]) as model:

        async def go() -> None:
            async with ModelGateway(model.config(), RequestBudget(1)) as gateway:
                await gateway.complete("tester", MESSAGES)

        asyncio.run(go())
        assert model.request_headers[0]["accept-encoding"] == "identity"


def test_credentials_in_the_base_url_are_never_described() -> None:
    """A base_url with userinfo or a query prints without them."""
    url = "https://user:secret@models.invalid/v1?key=secret"
    config = ModelConfig(url, "m", "k")
    assert "secret" not in json.dumps(config.describe()) and "secret" not in repr(config)
    assert config.describe()["base_url"] == "https://models.invalid/v1"
    risk = RiskModelConfig(url, "m", "k")
    assert "secret" not in json.dumps(risk.describe()) and "secret" not in repr(risk)


# --- through the CLI: a real coordinator starting a real remote_risk -------------------------


def federation(
    tmp_path: Path, model: AdversarialModel, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FEDERATION_DATA_DIR": str(tmp_path),
        **model.environment("FEDERATION_MODEL"),
        "FEDERATION_MODEL_TIMEOUT_SECONDS": "5",
    }
    env = {k: v for k, v in env.items() if not k.startswith("REMOTE_RISK_MODEL")}
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def test_demo_model_all_cases_reports_every_case_with_its_reason(tmp_path: Path) -> None:
    """Five cases, five different bad replies: one JSON document, five reasons, exit 0."""
    script = [broken_json(), null_choice(), null_message(), huge(3), gzip_bomb(50)]
    with adversarial_model(script) as model:
        completed = federation(tmp_path, model, "demo", "--model", "--case", "all", "--json")
    assert "Traceback" not in completed.stderr, completed.stderr
    assert completed.returncode == 0, completed.stderr
    cases = json.loads(completed.stdout)["cases"]
    assert [(case["status"], case["reason"]) for case in cases] == [
        ("failed", "model_reply_malformed"),
        ("failed", "model_reply_malformed"),
        ("failed", "model_reply_malformed"),
        ("failed", "model_reply_too_large"),
        ("failed", "model_reply_too_large"),
    ]
    assert all(case["model_commentary_unverified"] is None for case in cases)


def test_evaluate_model_keeps_every_row_and_counts_what_the_server_received(
    tmp_path: Path,
) -> None:
    """Every federation row fails with a reason; the rows' requests are what was sent."""
    script = [broken_json(), null_choice()]  # then HTTP 500: model_unavailable
    with adversarial_model(script) as model:
        completed = federation(tmp_path, model, "evaluate", "--model", "--json")
        received = len(model.requests)
    assert "Traceback" not in completed.stderr, completed.stderr
    rows = json.loads(completed.stdout)["rows"]
    assert len(rows) == 12
    federated = [row for row in rows if row["configuration"] != "single_controller"]
    assert {row["reason"] for row in federated} == {
        "model_reply_malformed",
        "model_unavailable",
    }
    assert sum(row["model_requests"] for row in rows) == received


# --- reasons cross the boundary ---------------------------------------------------------------


def _risk_env(model: AdversarialModel) -> dict[str, str]:
    return {**model.environment("REMOTE_RISK_MODEL"), "REMOTE_RISK_MODEL_TIMEOUT_SECONDS": "5"}


def plain_federation(
    tmp_path: Path, extra_env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FEDERATION_DATA_DIR": str(tmp_path), **extra_env}
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def test_the_remote_model_reason_reaches_the_handoff_and_run_show(tmp_path: Path) -> None:
    """remote_risk's model failure is the handoff's reason in demo --json and run show."""
    with adversarial_model([null_choice()]) as model:
        completed = plain_federation(tmp_path, _risk_env(model), "demo", "--json", "--case", "ok")
    # Exit 1: the case did not end as expected (the risk model failed), reported in full.
    assert completed.returncode == 1 and "Traceback" not in completed.stderr, completed.stderr
    case = json.loads(completed.stdout)["cases"][0]
    risk = next(h for h in case["handoffs"] if h["target"] != "operations")
    assert risk["reason"] == "remote_failed:model_reply_malformed"
    assert risk["error_code"] == "model_reply_malformed"
    shown = plain_federation(tmp_path, {}, "run", "show", case["run_id"], "--json")
    assert "remote_failed:model_reply_malformed" in shown.stdout, shown.stderr


HONEST_RISK = {
    "status": "ok",
    "summary": "Policy risk-policy-007 does not permit refund execution.",
    "facts": {"refund_execution_permitted": False, "privacy_review_required": False},
    "evidence_ids": ["risk-policy-007", "brief-001"],
}


def _supervisor_then_honest_risk(request: dict[str, Any]) -> Reply:
    """The supervisor asks both and concludes; risk answers what its records say."""
    if "tools" in request:
        return _supervisor(request)
    records = json.loads(request["messages"][-1]["content"])
    review = (
        records["brief"]["uses_real_conversations"]
        and records["policy_note"]["real_conversations_require_privacy_review"]
    )
    facts = {**HONEST_RISK["facts"], "privacy_review_required": review}
    return answer_reply(json.dumps({**HONEST_RISK, "facts": facts}))


def _supervisor_then_broken_risk(request: dict[str, Any]) -> Reply:
    """The supervisor asks both and then concludes; every risk request gets choices [null]."""
    if "tools" not in request:
        return null_choice()
    return _supervisor(request)


def _supervisor(request: dict[str, Any]) -> Reply:
    if any(message.get("role") == "tool" for message in request["messages"]):
        return answer_reply("Done.")
    calls = [
        {
            "id": f"c-{name}",
            "type": "function",
            "function": {"name": "ask_specialist", "arguments": json.dumps({"specialist": name})},
        }
        for name in ("operations", "risk")
    ]
    body = json.loads(answer_reply("x").body)
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": calls}
    body["choices"][0]["finish_reason"] = "tool_calls"
    return json_reply(body)


def test_evaluate_rows_carry_the_remote_model_reason(tmp_path: Path) -> None:
    """Each row where risk's model failed says model_reply_malformed, not null."""
    with adversarial_model(responder=_supervisor_then_broken_risk) as model:
        env = {**model.environment("FEDERATION_MODEL"), **_risk_env(model)}
        completed = plain_federation(tmp_path, env, "evaluate", "--model", "--json")
    assert "Traceback" not in completed.stderr, completed.stderr
    rows = json.loads(completed.stdout)["rows"]
    reached_the_model = [row for row in rows if row["case"] != "missing"]
    assert {row["reason"] for row in reached_the_model} == {"model_reply_malformed"}


def test_the_demo_trace_marks_a_remote_summary_as_unverified(throwaway_demo: Scenario) -> None:
    """People see the remote's summary labelled as unverified remote text."""
    completed = throwaway_demo
    assert completed.returncode == 0, completed.stderr
    assert "summary, unverified remote text: Policy risk-policy-007" in completed.stdout


def test_evaluate_counts_every_request_both_services_sent(tmp_path: Path) -> None:
    """Supervisor and risk model on one server: the rows' requests are what it received."""
    with adversarial_model(responder=_supervisor_then_honest_risk) as model:
        env = {**model.environment("FEDERATION_MODEL"), **_risk_env(model)}
        completed = plain_federation(tmp_path, env, "evaluate", "--model", "--json")
        received = len(model.requests)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    rows = json.loads(completed.stdout)["rows"]
    assert all(row["passed"] for row in rows)
    assert sum(row["model_requests"] for row in rows) == received
