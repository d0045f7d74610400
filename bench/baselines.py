"""The baseline servers, run as their own process: ``python -m bench.baselines KIND --port P``.

* ``sdk``: the official a2a-sdk 1.3.0 server (JSON-RPC, in-memory task store) with a
  trivial executor that opens a task, adds one text artifact and completes it;
* ``sdk-db``: the same with the a2a-sdk's own durable store, ``DatabaseTaskStore`` on a
  SQLite file (SQLAlchemy asyncio with aiosqlite, as the a2a-sdk ships it): the fairer
  peer of remote_risk, which stores every task;
* ``fastapi``: a bare FastAPI POST validating the request body with pydantic, the
  practical ceiling of any Python JSON-RPC service here;
* ``fastapi-jwt``: the same plus one EdDSA ``jwt.decode`` per request (key preloaded).

The a2a-sdk is a bench-only dependency; product code never imports it.
"""

from __future__ import annotations

import argparse
from typing import Any

import jwt
import uvicorn
from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel

from agent_cards.keys import TrustedKeys

SDK_RPC_PATH = "/a2a/jsonrpc"


def sdk_app(base_url: str, database: str | None = None) -> Any:
    from a2a.helpers import new_task_from_user_message, new_text_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from starlette.applications import Starlette

    class Trivial(AgentExecutor):
        async def execute(self, context: RequestContext, queue: EventQueue) -> None:
            task = context.current_task
            if task is None:
                assert context.message is not None
                task = new_task_from_user_message(context.message)
                await queue.enqueue_event(task)
            updater = TaskUpdater(queue, task.id, task.context_id)
            await updater.start_work()
            await updater.add_artifact([new_text_part("ok")], name="result")
            await updater.complete()

        async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
            await TaskUpdater(queue, context.task_id or "", context.context_id or "").cancel()

    card = AgentCard(
        name="Trivial",
        description="a2a-sdk baseline",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="1.0", url=base_url + SDK_RPC_PATH
            )
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["application/json", "text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="trivial", name="Trivial", description="completes", tags=["x"])],
    )
    store: Any = InMemoryTaskStore()
    if database is not None:
        from a2a.server.tasks import DatabaseTaskStore
        from sqlalchemy.ext.asyncio import create_async_engine

        store = DatabaseTaskStore(create_async_engine(f"sqlite+aiosqlite:///{database}"))
    handler = DefaultRequestHandler(agent_executor=Trivial(), task_store=store, agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url=SDK_RPC_PATH)
    return Starlette(routes=routes)


class Part(BaseModel):
    data: dict[str, Any] | None = None
    text: str | None = None
    mediaType: str | None = None


class Message(BaseModel):
    messageId: str
    role: str
    parts: list[Part]
    metadata: dict[str, Any] | None = None


class Params(BaseModel):
    message: Message


class Envelope(BaseModel):
    jsonrpc: str
    id: int | str
    method: str
    params: Params


def fastapi_app(jwks_file: str | None, audience: str | None) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    keys = list(TrustedKeys.from_file(jwks_file)) if jwks_file else []
    public_key = keys[0].public_key if keys else None

    @app.post(SDK_RPC_PATH)
    async def rpc(envelope: Envelope, authorization: str | None = Header(None)) -> dict[str, Any]:
        if public_key is not None:
            token = (authorization or "").removeprefix("Bearer ")
            try:
                jwt.decode(token, public_key, algorithms=["EdDSA"], audience=audience)
            except jwt.PyJWTError:
                raise HTTPException(401) from None
        task = {"id": envelope.params.message.messageId, "status": "TASK_STATE_COMPLETED"}
        return {"jsonrpc": "2.0", "id": envelope.id, "result": {"task": task}}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["sdk", "sdk-db", "fastapi", "fastapi-jwt"])
    parser.add_argument("--database", help="sdk-db: the SQLite file of its task store")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--jwks", help="fastapi-jwt: the issuer's JWK Set file")
    parser.add_argument("--audience", help="fastapi-jwt: the expected aud")
    args = parser.parse_args()
    if args.kind in ("sdk", "sdk-db"):
        app = sdk_app(f"http://127.0.0.1:{args.port}", args.database)
    else:
        app = fastapi_app(args.jwks if args.kind == "fastapi-jwt" else None, args.audience)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
