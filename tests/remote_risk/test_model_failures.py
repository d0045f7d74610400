"""A hostile model never crashes the risk skill: every reply is data until it is parsed.

The model is :mod:`tests.adversarial_model` on loopback (real HTTP, real ``openai``
client). Each bad reply ends the task FAILED with a stable ``errorCode``, within its
deadline plus a margin, with nothing left WORKING.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from contracts.evidence import Finding, FindingStatus
from contracts.wire import TaskState
from remote_risk.risk.interpreter import run_model_skill
from tests.adversarial_model import (
    Reply,
    adversarial_model,
    answer_reply,
    broken_json,
    drip,
    gzip_bomb,
    gzipped,
    huge,
    hung,
    json_reply,
    null_choice,
    null_message,
)
from tests.remote_risk.conftest import risk_input, risk_peer, user_message

HONEST = {
    "status": "ok",
    "summary": "Policy risk-policy-007 does not permit refund execution.",
    "facts": {"refund_execution_permitted": False, "privacy_review_required": False},
    "evidence_ids": ["risk-policy-007", "brief-001"],
}


def skill_with(reply: Reply, **bounds: Any) -> tuple[TaskState, Finding, float]:
    timeout = bounds.pop("timeout_seconds", 10.0)
    with adversarial_model([reply]) as model:
        started = time.monotonic()
        config = model.risk_config(timeout, **bounds)
        state, finding, _ = asyncio.run(run_model_skill(risk_input("ok"), config))
        return state, finding, time.monotonic() - started


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (broken_json(), "model_reply_malformed"),
        (Reply(b"<html>gateway</html>", headers=(("Content-Type", "text/html"),)), None),
        (null_choice(), "model_reply_malformed"),
        (null_message(), "model_reply_malformed"),
        (json_reply({"choices": "none"}), "model_reply_malformed"),
        (json_reply([1, 2]), "model_reply_malformed"),
        (json_reply({"choices": []}), "model_incomplete"),
        (Reply(b"", content_length=True), "model_reply_malformed"),
        (json_reply({"error": "down"}, status=503), "model_unavailable"),
        (gzipped(Reply(b'{"choices": [null]}')), "model_reply_malformed"),
    ],
)
def test_malformed_replies_fail_the_task_with_a_reason(reply: Reply, reason: str | None) -> None:
    """Broken JSON under application/json, choices [null], message null: FAILED, a reason."""
    state, finding, _ = skill_with(reply)
    assert state is TaskState.FAILED and finding.status is FindingStatus.FAILED
    assert finding.error_code == (reason or "model_reply_malformed")


def test_an_honest_gzipped_reply_is_still_read() -> None:
    """A server that compresses anyway is decoded (under the cap), not refused."""
    state, finding, _ = skill_with(gzipped(answer_reply(json.dumps(HONEST))))
    assert (state, finding.error_code) == (TaskState.COMPLETED, None)


def test_a_byte_a_second_drip_ends_at_the_deadline() -> None:
    """Headers, then one byte a second: the whole request ends at its 2 s deadline."""
    state, finding, elapsed = skill_with(drip(1.0), timeout_seconds=2.0)
    assert (state, finding.error_code) == (TaskState.FAILED, "model_timeout")
    assert elapsed < 8


def test_a_20_megabyte_reply_is_refused_at_the_cap() -> None:
    """20 MB never becomes a Finding or a summary: model_reply_too_large."""
    state, finding, _ = skill_with(huge(20), max_reply_bytes=100_000)
    assert (state, finding.error_code) == (TaskState.FAILED, "model_reply_too_large")
    assert len(finding.summary) < 1000


def test_a_gzip_bomb_is_capped_on_its_decoded_size() -> None:
    """About 200 KB of gzip that would decode to 200 MB stops at the cap."""
    state, finding, elapsed = skill_with(gzip_bomb(200), max_reply_bytes=1_000_000)
    assert (state, finding.error_code) == (TaskState.FAILED, "model_reply_too_large")
    assert elapsed < 10


def test_a_lease_with_no_time_left_sends_nothing() -> None:
    """When the lease leaves less than the margin, the model is not asked at all."""
    with adversarial_model([answer_reply(json.dumps(HONEST))]) as model:
        config = model.risk_config(10.0, lease_margin_seconds=8.0)
        state, finding, usage = asyncio.run(
            run_model_skill(risk_input("ok"), config, lease_expires_at=time.time() + 5)
        )
        assert model.requests == []
    assert (state, finding.error_code) == (TaskState.FAILED, "model_timeout")
    assert usage == {"requests": 0, "totalTokens": 0}


def test_the_lease_shortens_the_model_deadline() -> None:
    """A hung model under a lease 10 s away (margin 8 s) fails after about 2 s."""
    with adversarial_model([hung(30)]) as model:
        config = model.risk_config(20.0, lease_margin_seconds=8.0)
        started = time.monotonic()
        state, finding, _ = asyncio.run(
            run_model_skill(risk_input("ok"), config, lease_expires_at=time.time() + 10)
        )
        elapsed = time.monotonic() - started
    assert (state, finding.error_code) == (TaskState.FAILED, "model_timeout")
    assert elapsed < 8


def test_the_service_ends_the_task_failed_over_http() -> None:
    """Through the real risk service: the task is FAILED with the reason, not WORKING."""
    with adversarial_model([null_choice()]) as model, risk_peer(model=model.risk_config()) as peer:
        result = peer.result("SendMessage", {"message": user_message(risk_input("ok"))})
    task = result["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    data = task["status"]["message"]["parts"][0]["data"]
    assert data["errorCode"] == "model_reply_malformed"
