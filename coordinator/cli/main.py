"""The ``federation`` command line.

Every failure the user can cause or meet (a bad URL, a card that is not JSON, an agent
that is not registered, a remote error) ends with one line on stderr and exit status 2,
never a traceback. With ``--server`` (or ``FEDERATION_SERVER``) the commands a running
coordinator answers go to it; the same commands and printers serve both.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from coordinator.cli.api_client import CoordinatorClient
from coordinator.cli.backends import Local, Remote
from coordinator.cli.commands import LOCAL_ONLY, SHARED
from coordinator.cli.parser import build_parser
from coordinator.errors import FederationError, UsageError
from coordinator.service.facade import CoordinatorService
from coordinator.service.settings import load_client_settings
from coordinator.storage import datadir
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return dispatch(args)
    except FederationError as exc:
        print(f"federation: error: {exc} [{exc.reason}]", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("federation: interrupted", file=sys.stderr)
        return 130


def dispatch(args: argparse.Namespace) -> int:
    server = load_client_settings(server=args.server).server or None
    if server and (args.server or args.command in SHARED):
        if args.command not in SHARED:
            raise UsageError(
                f"`federation {args.command}` works on a data directory only; drop --server",
                "server_unsupported",
            )
        token = load_client_settings().required_token("--server")
        with CoordinatorClient(server, token) as client:
            return SHARED[args.command](args, Remote(client))
    data = DataDir(datadir.resolve(args.data_dir))
    service = CoordinatorService(Workspace.resolve(data, args.database_url))
    if args.command in SHARED:
        return SHARED[args.command](args, Local(service))
    return LOCAL_ONLY[args.command](args, service)


if __name__ == "__main__":
    raise SystemExit(main())
