"""A conformance agent for the A2A TCK, built on the same server layer as remote_risk.

TEST FIXTURE, NOT A SERVICE. It runs the JSON-RPC endpoint (:mod:`member_kit.server.jsonrpc`),
the HTTP+JSON binding (:mod:`member_kit.server.rest`), with ``--grpc-port`` the gRPC
binding (:mod:`member_kit.server.grpc_binding`),
task store (:mod:`member_kit.tasks.memory`), streams (:mod:`member_kit.server.streams`) and push
notifications (:mod:`member_kit.server.push`, :mod:`member_kit.server.webhooks`) that remote_risk
runs, with a scripted executor in place of the risk skill, so that the A2A Technology
Compatibility Kit can be pointed at our server code. It checks no delegation token (every
caller is the anonymous owner), accepts webhooks on loopback (the kit's receiver listens
there) and refuses to listen on anything but loopback unless ``--allow-non-loopback``.

Run it with ``python -m tests.conformance_agent`` from the repository root (``make conformance``).

What a message makes it do is chosen by the prefix of its ``messageId``, as in the kit's
``scenarios/*.feature`` (the longest matching prefix wins; anything else completes):

=============================  =========================================================
``tck-complete-task``          complete with the status message "Hello from TCK"
``tck-artifact-text|file|      complete with one text, file (raw), file (url) or data
file-url|data``                artifact
``tck-message-response``       answer with a Message, no task
``tck-input-required``         stop in INPUT_REQUIRED (a follow-up message continues it)
``tck-reject-task``            end REJECTED with the message "rejected"
``tck-stream-001|003|          WORKING, one text artifact, COMPLETED
ordering-001|artifact-text``
``tck-stream-002``             COMPLETED
``tck-stream-artifact-file``   WORKING, one file artifact, COMPLETED
``tck-stream-artifact-         WORKING, a text artifact in two chunks (``append``,
chunked``                      ``lastChunk``), COMPLETED
``test-resubscribe-message-    WORKING, then ``long_task_seconds`` later COMPLETED
id``
=============================  =========================================================
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from starlette.routing import Route

from agent_cards.keys import KeySet, SigningKey
from agent_cards.serving import card_route
from contracts.wire import (
    AgentCard,
    Artifact,
    GetExtendedAgentCardRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    TaskState,
)
from member_kit import errors
from member_kit.server.app import push_configs, signed_card
from member_kit.server.grpc_binding import GRPCServer
from member_kit.server.jsonrpc import (
    CallContext,
    JSONRPCEndpoint,
    anonymous,
)
from member_kit.server.operations import TaskOperations
from member_kit.server.push import PushConfigs
from member_kit.server.rest import RESTEndpoint
from member_kit.server.streams import TaskEventBroker, TaskUpdates
from member_kit.server.webhooks import Resolver, resolve
from member_kit.tasks.memory import TaskStore
from member_kit.tasks.record import TaskRecord
from remote_risk.settings import JSONRPC_PATH, REST_PATH, Settings
from tests.conformance_scripts import ArtifactStep, Status, Step, Wait, new_id, script_for

logger = logging.getLogger(__name__)

LOOPBACK_NETWORKS = ("127.0.0.0/8", "::1/128")
DEFAULT_LONG_TASK_SECONDS = 8.0


# --- the handler -----------------------------------------------------------------------------


@dataclass
class _Run:
    """One execution of a script on a task: the artifacts assembled so far."""

    record: TaskRecord
    artifacts: dict[str, Artifact] = field(default_factory=dict)


class ConformanceHandler(TaskOperations):
    """The A2A operations of the conformance agent (see the module docstring)."""

    def __init__(
        self,
        store: TaskStore,
        push: PushConfigs,
        *,
        long_task_seconds: float = DEFAULT_LONG_TASK_SECONDS,
        extended_card: AgentCard | None = None,
    ) -> None:
        super().__init__(store, TaskUpdates(TaskEventBroker(), push), push, extended_card)
        self._configs = push  # this agent always offers push notifications
        self._long_task_seconds = long_task_seconds

    async def get_extended_card(
        self, request: GetExtendedAgentCardRequest, context: CallContext
    ) -> AgentCard:
        """Every caller of this fixture is the anonymous owner (it checks no credentials),
        so the extended card is answered to it; remote_risk answers delegated callers only."""
        if self.extended_card is None:
            raise errors.UnsupportedOperation("this agent has no extended agent card")
        return self.extended_card

    async def send_message(
        self, request: SendMessageRequest, context: CallContext
    ) -> SendMessageResponse:
        configuration = request.configuration or SendMessageConfiguration()
        script = script_for(request.message.message_id)
        if isinstance(script, str):
            return SendMessageResponse(message=_reply(request.message, script))
        record = self._accept(request, configuration, context)
        self._start(record, script)
        if not configuration.return_immediately:
            await self._store.wait_settled(record)
        return SendMessageResponse(task=record.snapshot(configuration.history_length))

    async def send_streaming_message(
        self, request: SendMessageRequest, context: CallContext
    ) -> AsyncIterator[BaseModel]:
        configuration = request.configuration or SendMessageConfiguration()
        script = script_for(request.message.message_id)
        if isinstance(script, str):
            return _one(StreamResponse(message=_reply(request.message, script)))
        record = self._accept(request, configuration, context)
        stream = self._updates.follow(record.snapshot(configuration.history_length))
        self._start(record, script)
        return stream

    # --- the task's life ------------------------------------------------------------------

    def _accept(
        self,
        request: SendMessageRequest,
        configuration: SendMessageConfiguration,
        context: CallContext,
    ) -> TaskRecord:
        if configuration.history_length is not None and configuration.history_length < 0:
            raise errors.InvalidParams("params.configuration.historyLength: must be 0 or more")
        push_config = configuration.task_push_notification_config
        if push_config is not None:
            self._configs.delivery.policy.check_syntax(push_config.url)
        record = self._open_task(context.owner, request.message)
        if push_config is not None:
            self._configs.register(context.owner, record.id, push_config)
        return record

    def _open_task(self, owner: str, message: Message) -> TaskRecord:
        if message.task_id is None:
            return self._store.create(owner, message, message.context_id)
        record = self._store.get(owner, message.task_id)
        if record.terminal:
            raise errors.UnsupportedOperation(
                f"task {record.id} is {record.state.value} and takes no further messages",
                metadata={"taskId": record.id, "state": record.state.value},
            )
        if message.context_id is not None and message.context_id != record.context_id:
            raise errors.InvalidParams(
                f"params.message.contextId: task {record.id} belongs to another context"
            )
        self._store.resume(record, message)
        self._updates.status(owner, record.snapshot())
        return record

    def _start(self, record: TaskRecord, script: list[Step]) -> None:
        worker = asyncio.create_task(self._run(_Run(record), script))
        self._workers[record.id] = worker
        worker.add_done_callback(lambda _: self._workers.pop(record.id, None))

    async def _run(self, run: _Run, script: list[Step]) -> None:
        await asyncio.sleep(0)  # a returnImmediately caller sees the task as submitted
        for step in script:
            if isinstance(step, Wait):
                await asyncio.sleep(self._long_task_seconds)
            elif isinstance(step, ArtifactStep):
                self._artifact(run, step)
            elif not self._status(run, step):
                return

    def _artifact(self, run: _Run, step: ArtifactStep) -> None:
        artifact = step.artifact
        earlier = run.artifacts.get(artifact.artifact_id)
        if step.append and earlier is not None:
            parts = [*earlier.parts, *artifact.parts]
            run.artifacts[artifact.artifact_id] = earlier.model_copy(update={"parts": parts})
        else:
            run.artifacts[artifact.artifact_id] = artifact
        record = run.record
        self._updates.artifact(
            record.owner,
            record.snapshot(),
            artifact,
            append=step.append,
            last_chunk=step.last_chunk,
        )

    def _status(self, run: _Run, step: Status) -> bool:
        record = run.record
        message = _agent_message(record, step.text) if step.text else None
        artifacts = list(run.artifacts.values()) if step.state is TaskState.COMPLETED else None
        if not self._store.advance(record.id, step.state, message=message, artifacts=artifacts):
            return False
        self._updates.status(record.owner, record.snapshot())
        return True


def _reply(message: Message, text: str) -> Message:
    return Message(
        message_id=new_id(),
        role=Role.AGENT,
        parts=[Part(text=text)],
        context_id=message.context_id or new_id(),
    )


def _agent_message(record: TaskRecord, text: str) -> Message:
    return Message(
        message_id=new_id(),
        role=Role.AGENT,
        parts=[Part(text=text)],
        task_id=record.id,
        context_id=record.context_id,
    )


async def _one(event: BaseModel) -> AsyncIterator[BaseModel]:
    yield event


# --- the app ---------------------------------------------------------------------------------


def interfaces(public_base_url: str, grpc_address: str | None) -> list[dict[str, str]]:
    """JSON-RPC, HTTP+JSON and (with an address) gRPC, in that order."""
    base = public_base_url.rstrip("/")
    listed = [(base + JSONRPC_PATH, "JSONRPC"), (base + REST_PATH, "HTTP+JSON")]
    if grpc_address is not None:
        listed.append((grpc_address, "GRPC"))
    return [
        {"url": url, "protocolBinding": binding, "protocolVersion": "1.0"}
        for url, binding in listed
    ]


def conformance_card(public_base_url: str, grpc_address: str | None = None) -> AgentCard:
    return AgentCard.model_validate(
        {
            "name": "a2a-federation conformance agent",
            "description": (
                "A test fixture: remote_risk's A2A server layer with the TCK's scripted "
                "behaviours. It checks no credentials. Not a service."
            ),
            "supportedInterfaces": interfaces(public_base_url, grpc_address),
            "version": "0.1.0",
            "capabilities": {
                "streaming": True,
                "pushNotifications": True,
                "extendedAgentCard": True,
            },
            "defaultInputModes": ["text/plain", "application/json"],
            "defaultOutputModes": ["text/plain", "application/json"],
            "skills": [
                {
                    "id": "tck-scenarios",
                    "name": "TCK scenarios",
                    "description": "Behaves as the messageId prefix of each message asks.",
                    "tags": ["conformance", "test-fixture"],
                }
            ],
        }
    )


def create_app(
    public_base_url: str = "http://127.0.0.1:9999",
    *,
    long_task_seconds: float = DEFAULT_LONG_TASK_SECONDS,
    settings: Settings | None = None,
    grpc_port: int | None = None,
    resolve: dict[str, str] | None = None,
) -> FastAPI:
    """The conformance agent's app; webhooks on loopback are allowed (the kit's receiver).
    With ``grpc_port`` it also serves the gRPC binding (same process) on the base URL's
    host."""
    settings = settings or Settings(
        public_base_url=public_base_url,
        push_allowed_networks=LOOPBACK_NETWORKS,
        push_first_backoff_seconds=0.1,
    )
    keys = settings.signing_keys or KeySet(active=SigningKey.generate())
    host = urlsplit(settings.public_base_url).hostname or "127.0.0.1"
    grpc_address = f"{host}:{grpc_port}" if grpc_port is not None else None
    card = signed_card(conformance_card(settings.public_base_url, grpc_address), keys.active)
    store = TaskStore(settings.task_capacity)
    push = push_configs(settings, keys, store.get)
    if resolve:
        push.delivery.policy = replace(push.delivery.policy, resolver=fixed_names(resolve))
    public = conformance_card(settings.public_base_url, grpc_address)
    note = " (Extended card: served by GetExtendedAgentCard on every binding.)"
    extended = public.model_copy(update={"description": public.description + note})
    handler = ConformanceHandler(
        store,
        push,
        long_task_seconds=long_task_seconds,
        extended_card=signed_card(extended, keys.active),
    )
    endpoint = JSONRPCEndpoint(handler, authorize=anonymous, max_body_bytes=settings.max_body_bytes)
    grpc_server = (
        GRPCServer(endpoint.dispatcher, None, grpc_address) if grpc_address is not None else None
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if grpc_server is not None:
            await grpc_server.start()
        yield
        if grpc_server is not None:
            await grpc_server.stop()
        await handler.aclose()
        await push.delivery.aclose()

    app = FastAPI(
        title="conformance",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
        routes=[
            card_route(card, settings.card_max_age_seconds),
            Route(JSONRPC_PATH, endpoint.handle, methods=["POST"], name="a2a_jsonrpc"),
            # The kit posts to "/" relative to the interface URL (remote_risk serves it too).
            Route(JSONRPC_PATH + "/", endpoint.handle, methods=["POST"], name="a2a_jsonrpc_"),
            Route(
                REST_PATH + "/{path:path}",
                RESTEndpoint(endpoint.dispatcher).handle,
                methods=["GET", "POST", "DELETE"],
                name="a2a_rest",
            ),
        ],
    )
    app.state.card = card
    app.state.task_store = store
    app.state.push = push
    return app


def fixed_names(table: dict[str, str]) -> Resolver:
    """A resolver answering the names in ``table`` itself, the rest as the system does."""

    async def resolver(host: str, port: int) -> list[str]:
        if host in table:
            return [table[host]]
        return await resolve(host, port)

    return resolver


def resolve_entry(text: str) -> tuple[str, str]:
    host, _, address = text.partition("=")
    ipaddress.ip_address(address)  # a ValueError for argparse to report
    return host, address


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformance",
        description="Run the A2A conformance agent (a TEST FIXTURE that checks no token).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--public-base-url", help="URL the card advertises (default: listen URL)")
    parser.add_argument(
        "--grpc-port", type=int, help="also serve the gRPC binding on this port (same host)"
    )
    parser.add_argument(
        "--resolve",
        type=resolve_entry,
        action="append",
        default=[],
        metavar="HOST=ADDRESS",
        help="answer this webhook host name with this address (for a run without DNS)",
    )
    parser.add_argument(
        "--long-task-seconds",
        type=float,
        default=DEFAULT_LONG_TASK_SECONDS,
        help="how long the resubscription scenario stays WORKING",
    )
    parser.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="listen on a non-loopback address anyway (this agent checks no credentials)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if not is_loopback(args.host) and not args.allow_non_loopback:
        print(
            f"conformance: error: refusing to listen on {args.host}: this test fixture checks "
            "no credentials; pass --allow-non-loopback to do it anyway",
            file=sys.stderr,
        )
        raise SystemExit(2)
    host = f"[{args.host}]" if ":" in args.host else args.host
    base_url = args.public_base_url or f"http://{host}:{args.port}"
    app = create_app(
        base_url,
        long_task_seconds=args.long_task_seconds,
        grpc_port=args.grpc_port,
        resolve=dict(args.resolve),
    )
    print(f"conformance agent (test fixture, no auth) listening on {base_url}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
