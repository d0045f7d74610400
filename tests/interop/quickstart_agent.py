"""A stock a2a-sdk 1.3 agent, written the way the SDK's quickstart writes one, as a process.

``python -m tests.interop.quickstart_agent`` serves on loopback an unsigned card with one
skill (``summarize``) and no security scheme, the JSON-RPC binding at ``/a2a/jsonrpc``,
and prints ``agent listening on BASE_URL`` once it is ready. It knows nothing of the
federation: no token, no handoff, no receipt. Its executor answers every message with
one artifact holding one data part: the words of the ``text`` it was given, counted, and
the first of them. uvicorn's access log (stderr) lists every request it received.
"""

from __future__ import annotations

import asyncio
import copy
import sys
from typing import Any

import uvicorn
from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette
from uvicorn.config import LOGGING_CONFIG

from tests.servers import free_port


class SummaryExecutor(AgentExecutor):
    """Counts the words of the ``text`` it receives and names the first one."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        data = next(iter(get_data_parts(context.message.parts)), {})
        words = str(data.get("text", "")).split() if isinstance(data, dict) else []
        answer = {"words": len(words), "first": words[0] if words else ""}
        await updater.add_artifact([new_data_part(answer)], name="summary")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def agent_card(base_url: str) -> AgentCard:
    return AgentCard(
        name="Word Counter",
        description="Counts the words of a text.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="1.0", url=base_url + "/a2a/jsonrpc"
            )
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[
            AgentSkill(id="summarize", name="Summarize", description="count words", tags=["text"])
        ],
    )


def _logs_to_stderr() -> dict[str, Any]:
    """uvicorn's own logging set-up, its access log on stderr rather than stdout."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return config


async def serve() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    card = agent_card(base)
    handler = DefaultRequestHandler(
        agent_executor=SummaryExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/a2a/jsonrpc")
    config = uvicorn.Config(
        Starlette(routes=routes), host="127.0.0.1", port=port, log_config=_logs_to_stderr()
    )
    server = uvicorn.Server(config)
    started = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    print(f"agent listening on {base}", flush=True)
    await started


if __name__ == "__main__":
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        sys.exit(0)
