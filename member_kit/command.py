"""What every member's command line shares: its listening, trust and key flags, and how
it runs (logs set up from the flags, a configuration error as one line and exit status 2).

``python -m remote_risk`` and ``federation serve guard`` are built from these, each adding
its own flags and settings.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from member_kit.errors import StorageUnavailable
from member_kit.telemetry import logs
from member_kit.telemetry.logs import member_logs
from member_kit.telemetry.names import TelemetryNames
from member_kit.trust import issuers as trust

SettingsFrom = Callable[[argparse.Namespace, Mapping[str, str]], Any]
Serve = Callable[..., None]


def add_listening_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the member listens and what URL its card advertises."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--public-base-url", help="URL the card advertises (default: listen URL)")
    parser.add_argument(
        "--grpc-port", type=int, help="also serve the gRPC binding on this port (same host)"
    )


def add_trust_arguments(parser: argparse.ArgumentParser, *, data_dir_required: bool) -> None:
    """Whose delegation tokens are accepted, and where the member's own keys live."""
    parser.add_argument(
        "--trust-issuer",
        action="append",
        metavar="ISSUER=JWKS_FILE_OR_URL",
        help="accept delegation tokens of ISSUER (repeatable"
        + ("" if data_dir_required else f"; env {trust.TRUST_ENV_VAR}")
        + ")",
    )
    data_dir_help = "where the service keeps its keys and database"
    if not data_dir_required:
        data_dir_help += f" (env {trust.DATA_DIR_ENV_VAR})"
    parser.add_argument("--data-dir", required=data_dir_required, help=data_dir_help)
    parser.add_argument("--key-file", help="sign with this private key (PEM or JWK) instead")
    parser.add_argument(
        "--revocation-poll-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="fetch the status lists of accepted tokens this often (revocation fallback)",
    )
    parser.add_argument(
        "--insecure-anonymous",
        action="store_true",
        help="DEVELOPMENT ONLY: run without trusted issuers, accepting every caller",
    )


def run_member(
    prog: str,
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    settings_from: SettingsFrom,
    serve: Callable[[], Serve],
) -> None:
    """Parse ``argv``, set up logs (from ``<PROG>_LOG_LEVEL`` and ``<PROG>_LOG_FORMAT``,
    :mod:`member_kit.telemetry.names`), build the settings and run ``serve()``'s server
    until interrupted; a configuration error ends as one line ``PROG: error: ...``,
    status 2. ``serve`` is called once the flags are read, so ``--help`` imports no
    server."""
    args = parser.parse_args(argv)
    from member_kit.server.app import ConfigurationError

    member_logs(TelemetryNames.of(prog)).setup_from(args, os.environ)
    try:
        settings = settings_from(args, os.environ)
        serve()(args.host, args.port, public_base_url=args.public_base_url, settings=settings)
    # TrustConfigError is a ValueError
    except (ValueError, ConfigurationError, StorageUnavailable) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:  # the set-up lasts as long as the service (main may run inside another program)
        logs.reset()
