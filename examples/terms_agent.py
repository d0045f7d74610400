"""The legal team's ``check-terms`` as a stock a2a-sdk 1.3 agent, to run behind the guard.

The same skill as ``examples/terms_member.py`` (given ``{"text": "...", "terms": [...]}``
it says which terms the text uses and which it lacks), written the way the SDK's
quickstart writes an agent: an ``AgentExecutor``, the SDK's ``DefaultRequestHandler``
over an ``InMemoryTaskStore``, its card. It knows nothing of the federation (no token,
no handoff, no receipt): the kit's guard, its own process in front of it, does all that::

    python examples/terms_agent.py --port 8092
    federation serve guard --upstream http://127.0.0.1:8092 \\
        --skill-scope check-terms=terms:check --port 8091 --data-dir terms-guard-data \\
        --trust-issuer urn:a2a-federation:coordinator=http://127.0.0.1:8080/.well-known/jwks.json

then register the guard's URL (8091) as the legal team. ``federation demo --case chain``
runs it this way (coordinator/assessment/chain_case.py). The first line on stdout is
``legal-terms agent listening on BASE_URL``, printed once it accepts connections. Needs
the a2a-sdk (the ``sdk`` extra: ``pip install 'a2a-federation[sdk]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
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

SKILL_ID = "check-terms"
MAX_TERMS = 100


def check_terms(data: Any) -> dict[str, Any] | str:
    """``{"found", "missing"}`` for a valid input, else what is wrong with it."""
    if not isinstance(data, dict) or set(data) != {"text", "terms"}:
        return "must be a JSON object with exactly the keys text and terms"
    text, terms = data["text"], data["terms"]
    if not isinstance(text, str):
        return "text must be a string"
    if not isinstance(terms, list) or not all(isinstance(t, str) and t for t in terms):
        return "terms must be a list of non-empty strings"
    if len(terms) > MAX_TERMS:
        return f"at most {MAX_TERMS} terms"
    found = [term for term in terms if term.casefold() in text.casefold()]
    return {"found": found, "missing": [term for term in terms if term not in found]}


class CheckTermsExecutor(AgentExecutor):
    """Answers one data part ``{"found", "missing"}``, or fails the task saying why."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        answer = check_terms(next(iter(get_data_parts(context.message.parts)), None))
        if isinstance(answer, str):
            await updater.failed(updater.new_agent_message([new_data_part({"error": answer})]))
            return
        await updater.add_artifact([new_data_part(answer)], name="terms-report")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def agent_card(base_url: str) -> AgentCard:
    return AgentCard(
        name="legal-terms",
        description="The legal team's specialist: says which required terms a text uses.",
        version="0.1.0",
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="1.0", url=base_url + "/a2a/jsonrpc"
            )
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[
            AgentSkill(
                id=SKILL_ID,
                name="Check terms",
                description='Input: one data part {"text": "...", "terms": ["..."]}. '
                'Output: {"found": [...], "missing": [...]}.',
                tags=["legal", "terms"],
            )
        ],
    )


async def serve(host: str, port: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    base = f"http://{host}:{sock.getsockname()[1]}"
    card = agent_card(base)
    handler = DefaultRequestHandler(
        agent_executor=CheckTermsExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/a2a/jsonrpc")
    # uvicorn's logs go to stderr (its default), so stdout carries the one line below
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=routes), log_level="warning"))
    started = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        if started.done():
            await started  # it failed to start: its error, not a hang
            return
        await asyncio.sleep(0.02)
    print(f"legal-terms agent listening on {base}", flush=True)
    await started


def main() -> None:
    parser = argparse.ArgumentParser(description="the legal team's check-terms, a stock agent")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.host, args.port))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
