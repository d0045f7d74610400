"""The model gateway against a scripted OpenAI-compatible server, through the real client."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from coordinator.assessment.model_gateway import (
    LimitReached,
    ModelConfig,
    ModelConfigError,
    ModelError,
    ModelGateway,
    ModelReply,
    RequestBudget,
)
from tests.model_server import (
    PLACEHOLDER_KEY,
    ModelServer,
    Step,
    completion,
    says,
    scripted_model,
    tool_call,
)

MESSAGES = [{"role": "user", "content": "Say something short."}]


def ask(server: ModelServer, gateway_budget: int = 8, **config: Any) -> tuple[Any, ModelGateway]:
    """One request through a fresh gateway; returns the reply or the error raised."""

    async def go() -> tuple[Any, ModelGateway]:
        async with ModelGateway(server.config(**config), RequestBudget(gateway_budget)) as gw:
            try:
                return await gw.complete("tester", MESSAGES), gw
            except ModelError as error:
                return error, gw

    return asyncio.run(go())


def test_complete_reply_records_usage_and_sends_limits() -> None:
    """A complete reply is returned with its usage, and the request carried the output limit."""
    with scripted_model([says("Short answer.")]) as server:
        reply, gateway = ask(server, max_output_tokens=123)
    assert isinstance(reply, ModelReply) and reply.content == "Short answer."
    assert gateway.report()["calls"] == [
        {
            "role": "tester",
            "outcome": "complete",
            "prompt_tokens": 50,
            "completion_tokens": 10,
            "total_tokens": 60,
        }
    ]
    assert gateway.total_tokens == 60
    assert server.requests[0]["max_tokens"] == 123
    assert server.requests[0]["model"] == "scripted-model"


def test_missing_usage_stays_unknown() -> None:
    """When the service reports no usage, tokens are None (unknown), never 0."""
    with scripted_model([Step(completion(content="Hi.", with_usage=False))]) as server:
        reply, gateway = ask(server)
    assert isinstance(reply, ModelReply) and reply.usage is None
    assert gateway.total_tokens is None
    assert gateway.report()["calls"][0]["total_tokens"] is None


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        (Step(completion(content="Half a sen", finish_reason="length")), "model_incomplete"),
        (Step(completion(content="")), "model_incomplete"),
        (Step(completion(content="   ")), "model_incomplete"),
        (Step(completion(content="x", finish_reason="function_call")), "model_incomplete"),
        (Step(completion(refusal="I cannot help with that.")), "model_refused"),
        (Step(completion(content="x", finish_reason="content_filter")), "model_refused"),
        (Step({"error": {"message": "overloaded"}}, status=503), "model_unavailable"),
    ],
)
def test_incomplete_replies_raise(step: Step, reason: str) -> None:
    """Truncated, empty, abnormally ended, refused and failed replies raise with a stable reason."""
    with scripted_model([step, says("a retry would get this")]) as server:
        result, gateway = ask(server)
    assert isinstance(result, ModelError) and result.reason == reason
    assert len(server.requests) == 1, "the client must not retry"
    assert gateway.report()["requests"] == 1


def test_request_timeout_is_model_timeout() -> None:
    """A service slower than the request timeout ends the request with model_timeout."""
    with scripted_model([Step(completion(content="late"), delay_seconds=2.0)]) as server:
        result, gateway = ask(server, timeout_seconds=0.2)
    assert isinstance(result, ModelError) and result.reason == "model_timeout"
    assert gateway.report()["calls"][0]["outcome"] == "model_timeout"
    assert gateway.total_tokens is None


def test_budget_is_shared_and_refused_requests_are_not_sent() -> None:
    """Two roles share one budget; the request over it raises limit_reached and is not sent."""

    async def go(server: ModelServer) -> tuple[list[str], ModelGateway]:
        outcomes = []
        async with ModelGateway(server.config(), RequestBudget(2)) as gateway:
            for role in ("supervisor", "risk", "supervisor"):
                try:
                    await gateway.complete(role, MESSAGES)
                    outcomes.append("ok")
                except LimitReached as error:
                    outcomes.append(error.reason)
        return outcomes, gateway

    with scripted_model([says("one"), says("two"), says("three")]) as server:
        outcomes, gateway = asyncio.run(go(server))
    assert outcomes == ["ok", "ok", "limit_reached"]
    assert len(server.requests) == 2
    assert [call.role for call in gateway.calls] == ["supervisor", "risk"]


def test_tool_calls_are_passed_through_unchecked() -> None:
    """Tool calls come back as sent, for the host to check; the gateway judges none of them."""
    calls = [tool_call("c1", {"specialist": "risk"}), tool_call("", "not json", name="other")]
    with scripted_model([Step(completion(tool_calls=calls))]) as server:
        reply, _ = ask(server)
    assert isinstance(reply, ModelReply)
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("c1", "ask_specialist", json.dumps({"specialist": "risk"})),
        ("", "other", "not json"),
    ]


def test_key_never_appears_in_records() -> None:
    """The API key is sent as a bearer token but appears in no repr or report."""
    with scripted_model([says("ok")]) as server:
        _, gateway = ask(server)
    assert server.headers[0]["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
    assert PLACEHOLDER_KEY not in repr(gateway.config)
    assert PLACEHOLDER_KEY not in json.dumps(gateway.report())
    assert PLACEHOLDER_KEY not in json.dumps(gateway.config.describe())


def test_configuration_from_environment() -> None:
    """No variables means no model; a partial set is an error naming what is missing."""
    assert ModelConfig.from_env(environ={}) is None
    config = ModelConfig.from_env(
        environ={
            "FEDERATION_MODEL_BASE_URL": "http://127.0.0.1:9/v1",
            "FEDERATION_MODEL": "m",
            "FEDERATION_MODEL_API_KEY": "k",
            "FEDERATION_MODEL_MAX_OUTPUT_TOKENS": "50",
        }
    )
    assert config is not None and config.max_output_tokens == 50
    with pytest.raises(ModelConfigError, match="FEDERATION_MODEL_API_KEY"):
        ModelConfig.from_env(
            environ={"FEDERATION_MODEL_BASE_URL": "http://127.0.0.1:9/v1", "FEDERATION_MODEL": "m"}
        )
    with pytest.raises(ModelConfigError):
        ModelConfig.from_env(
            "REMOTE_RISK_MODEL",
            environ={
                "REMOTE_RISK_MODEL_BASE_URL": "ftp://x",
                "REMOTE_RISK_MODEL": "m",
                "REMOTE_RISK_MODEL_API_KEY": "k",
            },
        )
