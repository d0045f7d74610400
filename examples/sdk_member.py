"""A stock a2a-sdk 1.3 agent made a governed federation member with the kit, in-process.

The agent is written the way the SDK's quickstart writes one: an ``AgentExecutor`` (here
it shouts: the ``text`` it is given, upper-cased, and its length), the SDK's
``DefaultRequestHandler`` over an ``InMemoryTaskStore``, and its ``AgentCard``.
:func:`stock_app` serves it as the quickstart does (the SDK's card route, JSON-RPC and
HTTP+JSON apps), ungoverned. The glue below (marked; at most ten lines) makes it a
member instead: :func:`member_kit.sdk.govern` gives the routes, lifespan and edge
middleware that verify every delegation token, bind each task to its handoff and owner,
sign a receipt on every terminal task and keep the decision log with the audit routes.

    python examples/sdk_member.py --data-dir DIR --trust-issuer ISSUER=JWKS [--grpc-port N]
    python examples/sdk_member.py --stock [PORT]     # the same agent, ungoverned

Needs the ``sdk`` extra (``pip install 'a2a-federation[sdk]'``). ``--help`` lists the
flags (those of ``federation serve guard`` without ``--upstream``).
"""

from __future__ import annotations

import sys

import uvicorn
from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette


class ShoutExecutor(AgentExecutor):
    """Answers the ``text`` of a data part upper-cased, with its length."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        data = next(iter(get_data_parts(context.message.parts)), {})
        text = str(data.get("text", "")) if isinstance(data, dict) else ""
        await updater.add_artifact([new_data_part({"shout": text.upper(), "length": len(text)})])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def agent_card(base_url: str = "http://127.0.0.1:9999") -> AgentCard:
    return AgentCard(
        name="Shouter",
        description="Shouts a text back.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="1.0", url=base_url + "/a2a/jsonrpc"
            ),
            AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=base_url),
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[AgentSkill(id="shout", name="Shout", description="shout a text", tags=["text"])],
    )


def agent_handler(card: AgentCard) -> DefaultRequestHandler:
    return DefaultRequestHandler(
        agent_executor=ShoutExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )


def stock_app(base_url: str) -> Starlette:
    """The agent as the SDK's quickstart serves it: no token, no receipt, no log."""
    card = agent_card(base_url)
    handler = agent_handler(card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/a2a/jsonrpc")
    return Starlette(routes=routes + create_rest_routes(handler))


# --- glue: the agent made a member (tests/interop/test_sdk_member.py counts these lines) ---
from member_kit.sdk import govern, serve_member  # noqa: E402

SCOPES = {"shout": "text:shout"}


def member_app(settings):
    member = govern(agent_handler(agent_card()), agent_card(), settings, SCOPES)
    app = Starlette(routes=member.routes, lifespan=member.lifespan)
    member.install(app)
    return app


# --- end of glue ---


def _serve_stock(port: int) -> None:
    """``--stock [PORT]``: the ungoverned agent; first line ``agent listening on URL``."""
    config = uvicorn.Config(stock_app(f"http://127.0.0.1:{port}"), port=port, log_level="warning")
    server = uvicorn.Server(config)
    print(f"agent listening on http://127.0.0.1:{port}", flush=True)
    server.run()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--stock"]:
        _serve_stock(int(sys.argv[2]) if len(sys.argv) > 2 else 9999)
    else:
        serve_member("sdk-member", member_app, sys.argv[1:])
