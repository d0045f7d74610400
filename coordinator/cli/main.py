"""The ``federation`` command line, and its one error policy.

Every failure the user can cause or meet ends with one line on stderr,
``federation: error: REASON: message``, and an exit status that says what kind it was
(see :data:`EXIT_CODES`); never a traceback (``FEDERATION_DEBUG=1`` shows one). With
``--server`` (or ``FEDERATION_SERVER``) the commands a running coordinator answers go to
it; the same commands and printers serve both. Only the argument parser is imported
before the arguments are read, so ``federation --help`` starts quickly.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from coordinator.cli.parser import READ_ONLY, build_parser

if TYPE_CHECKING:
    from coordinator.service.facade import CoordinatorService

EXIT_CODES = {
    0: "the command did what was asked",
    1: "the work ended badly (a handoff not accepted, a failed check, a held card)",
    2: "usage or input error, or a refusal (the message says which)",
    3: "a remote, the coordinator's server or the database is unavailable",
    4: "the remote asked for input or authorisation (shown, marked untrusted); handoff closed",
    5: "`audit reconcile`: not checked: nothing compared, or an agent not asked (says why)",
    70: "an internal error",
    130: "interrupted",
    141: "the output pipe was closed (quiet)",
}
UNAVAILABLE_REASONS = frozenset(
    {"storage_unavailable", "card_unreachable", "unreachable", "timeout", "transport_error"}
)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(joined_values(sys.argv[1:] if argv is None else argv))
    # Everything else is imported once the command is known (start-up time).
    from coordinator.errors import FederationError

    try:
        if args.command == "completion":
            return print_completion(args.shell)
        return dispatch(args)
    except FederationError as exc:
        print(f"federation: error: {exc.reason}: {exc}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        print("federation: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``federation runs | head``): say nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:
        if os.environ.get("FEDERATION_DEBUG") == "1":
            raise
        reason, text, code = unexpected(exc)
        print(f"federation: error: {reason}: {text}", file=sys.stderr)
        return code


def unexpected(error: Exception) -> tuple[str, str, int]:
    """An error no command made a FederationError of, as one line and an exit code: the
    database failing (a connection lost, a disk gone read-only) is ``storage_unavailable``
    and exits 3, as the API answers it 503; anything else is ``internal_error``, 70."""
    from coordinator.storage.faults import is_storage_fault

    cause = getattr(error, "orig", None) or error  # the driver's own error, if wrapped
    said = f"{type(cause).__name__}: {(str(cause).strip().splitlines() or [''])[0]}"
    if is_storage_fault(error):
        hint = "try again once it is back; `federation recover` continues a handoff in flight"
        return "storage_unavailable", f"the database failed ({said}); {hint}", 3
    return "internal_error", said, 70


def print_completion(shell: str) -> int:
    import shtab

    print(shtab.complete(build_parser(), shell=shell), flush=True)
    return 0


# Options whose value may begin with "-": a kid is a base64url thumbprint, and argparse
# would read "--expect-kid -Xy..." as two options.
DASHED_VALUES = ("--expect-kid",)


def joined_values(argv: Sequence[str]) -> list[str]:
    """``--expect-kid -Xy`` as ``--expect-kid=-Xy``, so any kid can be given as printed."""
    joined: list[str] = []
    values = iter(argv)
    for arg in values:
        if arg in DASHED_VALUES:
            value = next(values, None)
            joined.append(arg if value is None else f"{arg}={value}")
        else:
            joined.append(arg)
    return joined


def exit_code(error: Exception) -> int:
    from coordinator.errors import ServerRefused, StorageError, TransportError

    if isinstance(error, TransportError | StorageError):
        return 3
    if isinstance(error, ServerRefused) and error.status >= 500:
        return 3
    if getattr(error, "reason", None) == "interrupted":
        return 130
    return 3 if getattr(error, "reason", None) in UNAVAILABLE_REASONS else 2


def dispatch(args: argparse.Namespace) -> int:
    from coordinator.authority.operator_credential import load_client_settings
    from coordinator.cli.commands import SHARED
    from coordinator.errors import UsageError

    server = load_client_settings(server=args.server).server or None
    if server and (args.server or args.command in SHARED):
        if args.command not in SHARED:
            raise UsageError(
                f"`federation {args.command}` works on a data directory only; drop --server",
                "server_unsupported",
            )
        return on_server(args, server)
    return here(args)


def on_server(args: argparse.Namespace, server: str) -> int:
    """The command, through a running coordinator's API (nothing of the service loaded)."""
    from coordinator.authority.operator_credential import load_client_settings
    from coordinator.cli.api_client import CoordinatorClient
    from coordinator.cli.backends import Remote
    from coordinator.cli.commands import SHARED

    token = load_client_settings().required_token("--server")
    with CoordinatorClient(server, token) as client:
        return SHARED[args.command](args, Remote(client))


def here(args: argparse.Namespace) -> int:
    """The command, on this machine's data directory (or ``--database-url``). It opens
    the service when it first asks it something, after it has read and checked its own
    input (a missing file or a bad option is reported without loading the service)."""
    from coordinator.cli.backends import Local
    from coordinator.cli.commands import LOCAL_ONLY, SHARED

    local = Local(lambda: open_service(args))
    if args.command in SHARED:
        return SHARED[args.command](args, local)
    return LOCAL_ONLY[args.command](args, local)


def open_service(args: argparse.Namespace) -> CoordinatorService:
    """The service over this data directory; a command that only reads refuses one where
    nothing was recorded (``no_ledger``) rather than create a database to report on."""
    from coordinator.service.facade import CoordinatorService
    from coordinator.storage.datadir import DataDir
    from coordinator.workspace import Workspace

    ws = Workspace.resolve(DataDir(data_directory(args)), args.database_url)
    if command_name(args) in READ_ONLY and not getattr(args, "bundle", None):
        ws.require_existing()
    return CoordinatorService(ws)


def data_directory(args: argparse.Namespace) -> Path:
    """``--data-dir``, else ``FEDERATION_DATA_DIR``, else the user's default; except that
    the demo, given neither, works in a throwaway directory and never touches the user's
    registry (it says where, so its runs can still be read)."""
    from coordinator.storage import datadir

    if args.command == "demo" and not args.data_dir and not os.environ.get(datadir.ENV_VAR):
        path = Path(tempfile.mkdtemp(prefix="federation-demo-"))
        print(f"demo data directory: {path} (throwaway)", file=sys.stderr)
        return path
    return datadir.resolve(args.data_dir)


def command_name(args: argparse.Namespace) -> str:
    """``audit verify``, ``run show``, ``runs``: the command and its sub-command."""
    sub = getattr(args, f"{args.command}_command", None)
    return f"{args.command} {sub}" if sub else str(args.command)


if __name__ == "__main__":
    raise SystemExit(main())
