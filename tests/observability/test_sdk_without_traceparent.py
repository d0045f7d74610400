"""A caller that sends no ``traceparent`` (the a2a-sdk client, our interop peer) still gets
a normal answer, and remote_risk starts a fresh trace of its own for the request."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.client import ClientConfig, create_client
from a2a.helpers import new_data_message
from a2a.types import Role, SendMessageRequest, TaskState

from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.observability.spans import Captured, eventually, parent_hex, trace_hex
from tests.observability.test_trace_across_hop import Recorder
from tests.remote_risk.conftest import risk_input
from tests.servers import free_port, running


def test_sdk_client_without_traceparent_gets_an_answer_and_a_fresh_trace(
    captured: Captured,
) -> None:
    port = free_port()
    recorder = Recorder(create_app(Settings(public_base_url=f"http://127.0.0.1:{port}")))

    async def exchange() -> Any:
        with running(recorder, port=port) as url:
            client = await create_client(url, client_config=ClientConfig(streaming=False))
            try:
                message = new_data_message(
                    risk_input("handoff"), media_type="application/json", role=Role.ROLE_USER
                )
                events = [e async for e in client.send_message(SendMessageRequest(message=message))]
                return events[0].task
            finally:
                await client.close()

    task = asyncio.run(exchange())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    posts = [
        h for h in recorder.headers if h.get("content-type", "").startswith("application/json")
    ]
    assert posts and not any("traceparent" in h for h in posts)

    def sends() -> list[Any]:
        return [
            s
            for s in captured.named("remote", "POST /a2a/jsonrpc")
            if (s.attributes or {}).get("remote_risk.a2a_method") == "SendMessage"
        ]

    eventually(lambda: bool(sends()))
    (server,) = sends()
    assert parent_hex(server) is None, "a new trace starts at remote_risk"
    skill = captured.named("remote", "remote_risk.skill")
    assert [trace_hex(s) for s in skill] == [trace_hex(server)]
