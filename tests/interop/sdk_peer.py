"""An a2a-sdk 1.3.0 server offering one binding, run as its own process by the tests.

``python -m tests.interop.sdk_peer --binding http_json|grpc|v03 --key FILE`` serves, on
loopback, a signed card (at ``/.well-known/agent-card.json`` on an HTTP port) naming only
that binding, and prints ``sdk peer listening on BASE_URL`` once it is ready. The SDK and
our generated gRPC modules register the same protobuf symbols; keeping the SDK in its own
process keeps the test's process free of its modules altogether.

What the agent does: it echoes the data parts it receives as one artifact, together with
what the request carried (whether a bearer token came, the ``A2A-Version`` it named), and
echoes the handoff binding (``handoffId``, ``attempt``) in the task's metadata; a
part ``{"hold": true}`` keeps the task WORKING until it is cancelled, and a part
``{"answer_after": seconds}`` holds the answer to the send that long before the task
exists (a send still out when its run is cancelled), and ``{"slow_cancel": seconds}``
holds the answer to a CancelTask of that task as long. ``--extended`` also
declares and serves an extended card (one more skill), signed with the same key (or with
``--extended-key``); ``--streaming`` declares ``capabilities.streaming``, so the
coordinator sends with the binding's streaming call and follows the task on it.

The v0.3 peer serves the card in the v0.3 shape (``url``, ``preferredTransport``,
``protocolVersion: "0.3"``) with a signature made as the v0.3 SDK made them (sorted,
compact JSON of the card without defaults and empty members), and answers the v0.3
JSON-RPC methods through the SDK's compat layer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import grpc
import jwt
import uvicorn
from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.grpc_handler import GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    a2a_pb2_grpc,
)
from a2a.utils.signing import create_agent_card_signer
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.servers import free_port

SCHEME = "delegation"


def _seen(context: RequestContext) -> dict[str, Any]:
    """What the request carried: a bearer token (yes or no) and the A2A-Version named."""
    state = context.call_context.state if context.call_context else {}
    headers = {k.lower(): v for k, v in (state.get("headers") or {}).items()}
    grpc_context = state.get("grpc_context")
    if grpc_context is not None:
        headers = {k.lower(): v for k, v in grpc_context.invocation_metadata() or ()}
    bearer = str(headers.get("authorization", "")).startswith("Bearer ")
    seen: dict[str, Any] = {"bearer": bearer, "version": headers.get("a2a-version")}
    tenant = context.call_context.tenant if context.call_context else ""
    if tenant:
        seen["tenant"] = tenant
    return seen


def _seconds(received: list[Any], name: str) -> float:
    """How long a data part asks to hold an answer (``{name: seconds}``; else none)."""
    held = [d.get(name) for d in received if isinstance(d, dict)]
    return max([float(s) for s in held if isinstance(s, (int, float))], default=0.0)


class EchoExecutor(AgentExecutor):
    def __init__(self) -> None:
        self.slow_cancels: dict[str, float] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        received = get_data_parts(context.message.parts) if context.message else []
        if task is None:
            assert context.message is not None
            await asyncio.sleep(_seconds(received, "answer_after"))
            task = new_task_from_user_message(context.message)
            # A delegation-aware agent echoes the handoff it works for.
            sent = MessageToDict(context.message.metadata)
            task.metadata.update({k: sent[k] for k in ("handoffId", "attempt") if k in sent})
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if any(isinstance(d, dict) and d.get("hold") for d in received):
            self.slow_cancels[task.id] = _seconds(received, "slow_cancel")
            return  # stays WORKING until cancelled
        echo = {"echo": received, "seen": _seen(context)}
        await updater.add_artifact([new_data_part(echo)], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await asyncio.sleep(self.slow_cancels.pop(context.task_id or "", 0.0))
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def _card(
    interface: AgentInterface, extended: bool, skills: list[str], streaming: bool = False
) -> AgentCard:
    requirement = SecurityRequirement(schemes={SCHEME: StringList(list=["risk:interpret"])})
    return AgentCard(
        name="SDK Echo",
        description="An a2a-sdk server offering one binding",
        version="1.0.0",
        supported_interfaces=[interface],
        capabilities=AgentCapabilities(streaming=streaming, extended_agent_card=extended),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        security_schemes={
            SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", bearer_format="JWT"
                )
            )
        },
        skills=[
            AgentSkill(
                id=skill,
                name=skill,
                description="echo data",
                tags=["echo"],
                security_requirements=[requirement],
            )
            for skill in skills
        ],
    )


def _key(args: argparse.Namespace, path: str | None = None) -> dict[str, Any]:
    with open(path or args.key) as file:
        loaded: dict[str, Any] = json.load(file)
    return loaded


def _signer(key: dict[str, Any]) -> Any:
    return create_agent_card_signer(
        key["private_pem"].encode(), {"alg": "EdDSA", "kid": key["kid"], "typ": "JOSE"}
    )


def _clean_empty(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: c for k, v in value.items() if (c := _clean_empty(v)) is not None}
        return kept or None
    if isinstance(value, list):
        items = [c for v in value if (c := _clean_empty(v)) is not None]
        return items or None
    return None if value == "" else value


V03_DEFAULTS = {"protocolVersion": "0.3.0", "preferredTransport": "JSONRPC"}


def v03_card(card: AgentCard, key: dict[str, Any]) -> dict[str, Any]:
    """The card in the v0.3 shape, signed as the v0.3 SDK signed cards."""
    document = to_compat_agent_card(card).model_dump(mode="json", by_alias=True, exclude_none=True)
    document.pop("signatures", None)
    payload = {k: v for k, v in document.items() if V03_DEFAULTS.get(k) != v}
    signed = json.dumps(_clean_empty(payload), separators=(",", ":"), sort_keys=True)
    header = {"alg": "EdDSA", "kid": key["kid"], "typ": "JOSE"}
    compact = jwt.PyJWS().encode(signed.encode(), key["private_pem"], "EdDSA", header)
    protected, _, signature = compact.split(".")
    document["signatures"] = [{"protected": protected, "signature": signature}]
    return document


def _v03_signed(card: AgentCard, key: dict[str, Any]) -> AgentCard:
    """``card`` carrying a signature over the v0.3 document the compat layer makes of it."""
    signatures = v03_card(card, key)["signatures"]
    del card.signatures[:]
    for entry in signatures:
        card.signatures.add(protected=entry["protected"], signature=entry["signature"])
    return card


def _handler(card: AgentCard, extended: AgentCard | None) -> DefaultRequestHandler:
    return DefaultRequestHandler(
        agent_executor=EchoExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        extended_agent_card=extended,
    )


def _cards(
    args: argparse.Namespace, interface: AgentInterface
) -> tuple[AgentCard, AgentCard | None]:
    key = _key(args)
    sign = _signer(key)
    card = sign(_card(interface, args.extended, ["echo"], args.streaming))
    extended_sign = _signer(_key(args, args.extended_key)) if args.extended_key else sign
    skills = ["echo", "echo-extended"]
    extended = _card(interface, True, skills, args.streaming) if args.extended else None
    extended = extended_sign(extended) if extended is not None else None
    return card, extended


async def serve(args: argparse.Namespace) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    routes: list[Any] = []
    grpc_server = None
    if args.binding == "http_json":
        prefix = "" if args.tenant else "/rest"  # the SDK mounts /{tenant} before a prefix
        interface = AgentInterface(
            protocol_binding="HTTP+JSON", protocol_version="1.0", url=base + prefix
        )
        if args.tenant:
            interface.tenant = args.tenant
        card, extended = _cards(args, interface)
        routes = create_rest_routes(_handler(card, extended), path_prefix=prefix)
    elif args.binding == "grpc":
        grpc_port = free_port()
        interface = AgentInterface(
            protocol_binding="GRPC", protocol_version="1.0", url=f"127.0.0.1:{grpc_port}"
        )
        if args.tenant:
            interface.tenant = args.tenant
        card, extended = _cards(args, interface)
        grpc_server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(
            GrpcHandler(_handler(card, extended)), grpc_server
        )
        grpc_server.add_insecure_port(f"127.0.0.1:{grpc_port}")
        await grpc_server.start()
    else:
        interface = AgentInterface(
            protocol_binding="JSONRPC", protocol_version="0.3", url=base + "/a2a/jsonrpc"
        )
        card, extended = _cards(args, interface)
        if extended is not None:
            # the compat layer serves the extended card in the v0.3 shape: sign that
            extended = _v03_signed(extended, _key(args, args.extended_key))
        handler = _handler(card, extended)
        routes = create_jsonrpc_routes(handler, rpc_url="/a2a/jsonrpc", enable_v0_3_compat=True)
        document = v03_card(card, _key(args))

        async def v03_card_route(request: Request) -> JSONResponse:
            return JSONResponse(document)

        routes.append(Route("/.well-known/agent-card.json", v03_card_route, methods=["GET"]))
    if args.binding != "v03":
        routes = create_agent_card_routes(card) + routes
    config = uvicorn.Config(
        Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    started = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    print(f"sdk peer listening on {base}", flush=True)
    await started
    if grpc_server is not None:
        await grpc_server.stop(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--binding", choices=["http_json", "grpc", "v03"], required=True)
    parser.add_argument("--key", required=True, help="JSON file: kid and private_pem")
    parser.add_argument("--extended", action="store_true")
    parser.add_argument("--tenant", help="name this tenant on the card's interface")
    parser.add_argument("--streaming", action="store_true", help="declare and serve streams")
    parser.add_argument("--extended-key", help="sign the extended card with this key instead")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
