"""``federation serve coordinator``: the coordinator as a long-lived process.

It serves :func:`coordinator.service.http.api.create_api` with uvicorn and, in the same process, the
worker that drives in-flight handoffs. Configuration comes from ``FEDERATION_*`` variables
(:mod:`coordinator.service.settings`); the flags here override them. Without an operator token
the process refuses to start.
"""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from agent_cards.edge.listening import listening_socket as shared_listening_socket
from agent_cards.edge.listening import url_host
from agent_cards.edge.protocol import uvicorn_options
from agent_cards.runtime import collector
from coordinator import loop as event_loop
from coordinator.errors import UsageError
from coordinator.service.http.api import AppExtension, create_api
from coordinator.service.http.limits import coordinator_limits
from coordinator.service.settings import CoordinatorSettings, load_coordinator_settings
from coordinator.telemetry import logs
from coordinator.workspace import Workspace


def build_serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="federation serve coordinator",
        description="Run the coordinator's HTTP API and its workers in the foreground.",
    )
    parser.add_argument("--host", help="listen address (env FEDERATION_HOST, default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, help="listen port, 0 picks a free one (env FEDERATION_PORT, 8080)"
    )
    parser.add_argument(
        "--operator-token-file",
        type=Path,
        metavar="FILE",
        help="the bearer token API callers must present (env FEDERATION_OPERATOR_TOKEN_FILE "
        "or FEDERATION_OPERATOR_TOKEN)",
    )
    parser.add_argument(
        "--worker-lease-seconds",
        type=float,
        help="how long a claimed handoff stays this process's (env "
        "FEDERATION_WORKER_LEASE_SECONDS, default 10)",
    )
    logs.add_arguments(parser)
    return parser


def settings_from(args: argparse.Namespace) -> CoordinatorSettings:
    overrides: dict[str, object] = {
        "host": args.host,
        "port": args.port,
        "worker_lease_seconds": args.worker_lease_seconds,
    }
    if args.operator_token_file is not None:
        # a token file named on the command line replaces any token from the environment
        overrides["operator_token_file"] = args.operator_token_file
        settings = load_coordinator_settings(**overrides)
        return settings.model_copy(update={"operator_token": None})
    return load_coordinator_settings(**overrides)


def main(argv: Sequence[str], ws: Workspace, extensions: Sequence[AppExtension] = ()) -> int:
    args = build_serve_parser().parse_args(argv)
    logs.setup_from(args, os.environ)
    try:  # the set-up lasts as long as the service (main may run inside another program)
        settings = settings_from(args)
        serve(ws, settings, extensions)
    finally:
        logs.reset()
    return 0


def serve(
    ws: Workspace, settings: CoordinatorSettings, extensions: Sequence[AppExtension] = ()
) -> None:
    """Serve until interrupted (SIGINT or SIGTERM), then stop the workers.

    The first line on stdout is ``coordinator listening on http://HOST:PORT`` with the real
    port, printed once the socket accepts connections. Every log line, the access
    log's included, goes to stderr (see :mod:`coordinator.telemetry.logs`).
    """
    app = create_api(ws, settings, extensions)
    logs.add_secret(settings.required_token("the coordinator API"))
    sock = listening_socket(settings.host, settings.port)
    try:
        config = uvicorn.Config(
            app,
            log_level="info",
            access_log=False,
            lifespan="on",
            loop=event_loop.uvicorn_loop(),
            **uvicorn_options(coordinator_limits()),
        )
        where = f"{url_host(settings.host)}:{sock.getsockname()[1]}"
        print(f"coordinator listening on http://{where}", flush=True)
        logs.adopt_uvicorn()
        collector.settle()
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        ws.close()


def listening_socket(host: str, port: int) -> socket.socket:
    """The shared listening socket (:mod:`agent_cards.edge.listening`), or a UsageError."""
    try:
        return shared_listening_socket(host, port)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}", "listen_failed"
        ) from None
