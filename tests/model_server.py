"""A scripted OpenAI-compatible chat-completions server for tests, served on loopback.

Each test writes the replies the "model" gives, in order; the server answers each
``POST /v1/chat/completions`` with the next one and keeps every request body it received,
so a test can check what the real ``openai`` client sent. A request beyond the script is
answered with HTTP 500, so an unexpected extra request shows up as a failure.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from coordinator.assessment.model_gateway import ModelConfig
from remote_risk.risk import model as risk_model
from tests.servers import running

MODEL_ID = "scripted-model"
PLACEHOLDER_KEY = "placeholder-not-a-key"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Step:
    """One scripted answer: a JSON body, after an optional delay, with a status code."""

    body: dict[str, Any]
    delay_seconds: float = 0.0
    status: int = 200


@dataclass
class ModelServer:
    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def config(self, timeout_seconds: float = 10.0, max_output_tokens: int = 300) -> ModelConfig:
        return ModelConfig(
            self.base_url, MODEL_ID, PLACEHOLDER_KEY, timeout_seconds, max_output_tokens
        )

    def risk_config(self, timeout_seconds: float = 10.0, **bounds: Any) -> risk_model.ModelConfig:
        """The same service as remote_risk's own model configuration."""
        return risk_model.ModelConfig(
            self.base_url, MODEL_ID, PLACEHOLDER_KEY, timeout_seconds, **bounds
        )


def usage(prompt: int = 50, completion: int = 10) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    usage_: dict[str, int] | None = None,
    refusal: str | None = None,
    with_usage: bool = True,
) -> dict[str, Any]:
    """A chat.completion body with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if refusal is not None:
        message["refusal"] = refusal
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL_ID,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if with_usage:
        body["usage"] = usage_ or usage()
    return body


def tool_call(
    call_id: str, arguments: Any = None, name: str = "ask_specialist", type_: str = "function"
) -> dict[str, Any]:
    """A tool call; ``arguments`` that are not a string are JSON-encoded."""
    if arguments is None:
        arguments = {"specialist": "operations"}
    encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": type_, "function": {"name": name, "arguments": encoded}}


def asks(*specialists: str, prefix: str = "call") -> Step:
    """One supervisor round asking ``specialists``, with fresh call ids."""
    calls = [tool_call(f"{prefix}-{next(_ids)}", {"specialist": s}) for s in specialists]
    return Step(completion(tool_calls=calls))


def says(text: str) -> Step:
    return Step(completion(content=text))


def model_app(script: list[Step], server: ModelServer) -> FastAPI:
    steps = iter(script)
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        server.requests.append(await request.json())
        server.headers.append(dict(request.headers))
        step = next(steps, None)
        if step is None:
            error = {"error": {"message": "script exhausted", "type": "test_script"}}
            return JSONResponse(error, status_code=500)
        if step.delay_seconds:
            await asyncio.sleep(step.delay_seconds)
        return JSONResponse(step.body, status_code=step.status)

    return app


@contextmanager
def scripted_model(script: list[Step]) -> Iterator[ModelServer]:
    """Serve ``script`` on loopback; yield the server with its ``/v1`` base URL."""
    server = ModelServer(base_url="")
    with running(model_app(script, server)) as url:
        server.base_url = f"{url}/v1"
        yield server
