"""The ``federation`` command line's arguments: every command, option and help text."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coordinator.cli import return_options

# Kept here rather than imported, so that reading the arguments imports nothing else:
# tests/coordinator/test_cli_conventions.py checks they match the modules that own them.
CASES = ("ok", "missing", "failure", "conflict", "handoff")
CHAIN_CASE = "chain"  # coordinator.assessment.chain_case.CASE: three services, two hops
DATA_DIR_ENV = "FEDERATION_DATA_DIR"
DATABASE_ENV = "FEDERATION_DATABASE_URL"
PUBLISH_SECONDS = 600  # coordinator.authority.identity.DEFAULT_PUBLISH_SECONDS

DESCRIPTION = "Governed delegation between agents of different teams over A2A v1.0."
# Commands that only read: on a data directory with nothing recorded they say so and
# exit 2 instead of creating a database.
READ_ONLY = frozenset(
    {
        "runs",
        "run show",
        "audit show",
        "audit verify",
        "audit export",
        "audit prove",
        "audit reconcile",
    }
)


def version() -> str:
    from importlib import metadata  # read only when --version is asked (start-up time)

    try:
        return metadata.version("a2a-federation")
    except metadata.PackageNotFoundError:
        return "unknown"


class PrintVersion(argparse.Action):
    """``--version``: argparse's own action, with the version looked up when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"federation {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="federation", description=DESCRIPTION)
    parser.add_argument("--version", action=PrintVersion, help="print the version")
    parser.add_argument("--data-dir", help=f"where state is kept (env {DATA_DIR_ENV})")
    parser.add_argument(
        "--database-url",
        help=f"PostgreSQL instead of the data directory's SQLite (env {DATABASE_ENV})",
    )
    parser.add_argument(
        "--server",
        metavar="URL",
        help="send register, agents, delegate, runs, run, cancel and audit to a running "
        "coordinator "
        "(env FEDERATION_SERVER; token from FEDERATION_OPERATOR_TOKEN[_FILE])",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="run the pilot assessment against remote_risk")
    demo.add_argument(
        "--case",
        choices=[*CASES, CHAIN_CASE, "all"],
        default="all",
        help="which case to run (default: all)",
    )
    demo.add_argument("--json", action="store_true", help="print one JSON document")
    demo.add_argument("--parallel", action="store_true", help="consult specialists at once")
    demo.add_argument(
        "--model", action="store_true", help="a model supervises (FEDERATION_MODEL_* settings)"
    )

    evaluate = commands.add_parser(
        "evaluate", help="single controller vs sequential vs parallel delegation, same cases"
    )
    evaluate.add_argument("--json", action="store_true", help="print one JSON document")
    evaluate.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per case")
    evaluate.add_argument(
        "--model", action="store_true", help="use the model configured by FEDERATION_MODEL_*"
    )

    serve = commands.add_parser(
        "serve",
        help="run a service in the foreground",
        description="Run a service in the foreground. Options after the service name are "
        "the service's own (see `federation serve risk --help`, `federation serve guard "
        "--help`).",
    )
    serve.add_argument("service", choices=["risk", "coordinator", "guard"], help="which service")
    serve.add_argument("service_args", nargs=argparse.REMAINDER, help="the service's own options")

    register = commands.add_parser("register", help="fetch, validate and keep an agent card")
    register.add_argument("url", help="the agent's base URL or its agent-card.json URL")
    register.add_argument("--name", help="local name (default: from the card's name)")
    register.add_argument("--skill", help="refuse the card unless it declares this skill")
    trust = register.add_mutually_exclusive_group()
    trust.add_argument("--trust-key", type=Path, metavar="FILE", help="pin a JWK or JWKS file")
    trust.add_argument("--expect-kid", metavar="KID", help="pin this kid from the origin's JWKS")
    trust.add_argument(
        "--trust-on-first-use",
        action="store_true",
        help="development only: pin whatever keys the origin serves now (recorded as such)",
    )
    register.add_argument(
        "--approve", action="store_true", help="adopt a changed card that asks for more"
    )
    register.add_argument("--json", action="store_true", help="print the registration as JSON")
    register.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="URL",
        help="an origin besides the card's own that its interfaces may be on (repeatable)",
    )
    register.add_argument(
        "--take-address-from",
        metavar="NAME",
        help="give this agent the address the registered agent NAME holds (NAME is removed)",
    )
    return_options.add_register_options(register)

    commands.add_parser(
        "recover", help="continue every in-flight handoff left by a coordinator that stopped"
    )
    worker = commands.add_parser(
        "worker", help="drive in-flight handoffs from the shared database until stopped"
    )
    worker.add_argument(
        "--lease-seconds",
        type=float,
        default=10.0,
        help="how long a claimed handoff stays this worker's without renewal (default 10)",
    )
    runs = commands.add_parser("runs", help="list recorded runs, newest first")
    runs.add_argument(
        "--state", help="live, cancelled, finished, or the state a run's last branch ended in"
    )
    runs.add_argument("--since", metavar="TIME", help="runs started at or after this ISO 8601 time")
    runs.add_argument("--limit", type=int, default=50, metavar="N", help="runs per page (50)")
    runs.add_argument("--cursor", help="the page after the one that printed this cursor")
    runs.add_argument("--json", action="store_true", help="print the page as JSON")
    run = commands.add_parser("run", help="inspect one run")
    run_commands = run.add_subparsers(dest="run_command", required=True)
    show = run_commands.add_parser("show", help="ownership, artifacts, budget, pending")
    show.add_argument("run_id", help="the run's id, as `federation runs` lists it")
    show.add_argument("--json", action="store_true", help="print the run's document")
    show.add_argument(
        "--artifact",
        type=int,
        metavar="N",
        help="print artifact N (as numbered in run show) whole, as JSON (untrusted)",
    )

    cancel = commands.add_parser(
        "cancel", help="cancel every live branch of a run (CancelTask to each remote)"
    )
    cancel.add_argument("run_id", help="the run's id, as `federation runs` lists it")
    cancel.add_argument("--reason", metavar="TEXT", help="why: kept in the ledger and the run")
    cancel.add_argument("--json", action="store_true", help="print the run's document")

    revoke = commands.add_parser(
        "revoke",
        help="revoke the grants of a run or a handoff (signed push to each member, status list)",
    )
    revoke.add_argument("target", metavar="RUN|HANDOFF", help="a run id or a handoff id")
    revoke.add_argument("--reason", metavar="TEXT", help="why: kept in the ledger and the run")
    revoke.add_argument("--json", action="store_true", help="print the revocation as JSON")

    audit = commands.add_parser("audit", help="the tamper-evident audit ledger")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    verify = audit_commands.add_parser("verify", help="check the whole hash chain")
    verify.add_argument("--bundle", type=Path, metavar="FILE", help="check an exported bundle")
    verify.add_argument(
        "--coordinator-key",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="with --bundle: the coordinator's public key, a JWK or JWK Set as "
        "`federation keys show` prints it (the tree head must be signed by it)",
    )
    verify.add_argument(
        "--remote-key",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="with --bundle, repeatable: a remote's public key (JWK or JWK Set); every "
        "receipt must be signed by one of them",
    )
    verify.add_argument(
        "--unanchored",
        action="store_true",
        help="with --bundle and no key: check the structure against the bundle's own "
        "keys; this proves nothing",
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    audit_show = audit_commands.add_parser("show", help="rebuild a run from the ledger alone")
    audit_show.add_argument("run_id", help="the run's id")
    audit_show.add_argument("--json", action="store_true", help="print the reconstruction")
    export = audit_commands.add_parser("export", help="a self-contained, signed run bundle")
    export.add_argument("run_id", help="the run's id")
    export.add_argument("--output", type=Path, metavar="FILE", help="default: stdout")
    prove = audit_commands.add_parser(
        "prove", help="a run's events with inclusion proofs against a signed tree head"
    )
    prove.add_argument("run_id", help="the run's id")
    prove.add_argument("--output", type=Path, metavar="FILE", help="default: stdout")
    consistency = audit_commands.add_parser(
        "consistency", help="prove that one signed tree head extends another"
    )
    for name in ("HEAD_A", "HEAD_B"):
        consistency.add_argument(
            name.lower(),
            metavar=name,
            help="a file holding a signed tree head (or a proof bundle), or the tree size "
            "of a head this ledger kept",
        )
    consistency.add_argument("--json", action="store_true", help="print one JSON document")
    reconcile = audit_commands.add_parser(
        "reconcile",
        help="compare each handoff of a run with the remote's own audit log (each agent "
        "asked with its own token: `agents audit-credential`; none: audit_credential_missing)",
    )
    reconcile.add_argument("run_id", help="the run's id")
    reconcile.add_argument("--json", action="store_true", help="print one JSON document")

    keys = commands.add_parser("keys", help="the coordinator's signing keys")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True)
    keys_commands.add_parser("show", help="print the public JWK Set (what remotes pin)")
    rotate = keys_commands.add_parser(
        "rotate", help="publish a new signing key now, active after a delay (or --activate)"
    )
    rotate.add_argument(
        "--grace-seconds",
        type=int,
        default=3600,
        help="how long the previous key keeps verifying once replaced (default 3600)",
    )
    rotate.add_argument(
        "--publish-seconds",
        type=int,
        default=PUBLISH_SECONDS,
        help=f"how long the new key is published before it signs (default {PUBLISH_SECONDS}, "
        "twice the JWK Set cache time; 0: at once)",
    )
    rotate.add_argument(
        "--activate", action="store_true", help="make the key published earlier active now"
    )

    agents = commands.add_parser(
        "agents",
        help="list, show or remove registered agents, and review held cards",
        description="With no sub-command, list the registered agents.",
    )
    agents.add_argument("--json", action="store_true", help="print the agents as JSON")
    agents_commands = agents.add_subparsers(
        dest="agents_command", metavar="{show,pending,refuse,remove,audit-credential}"
    )
    agent_show = agents_commands.add_parser(
        "show", help="one agent: card, pinned keys, skills, scopes, held card"
    )
    agent_show.add_argument("name", help="the agent's local name, as `federation agents` lists")
    agent_show.add_argument("--json", action="store_true", help="print the agent as JSON")
    pending = agents_commands.add_parser(
        "pending", help="changed cards held for approval, as a diff of what they ask for"
    )
    pending.add_argument("--json", action="store_true", help="print the held cards as JSON")
    refuse = agents_commands.add_parser(
        "refuse", help="drop the card held for an agent; the registered card stays"
    )
    refuse.add_argument("name", help="the agent's local name")
    refuse.add_argument("--json", action="store_true", help="print the agent as JSON")
    remove = agents_commands.add_parser("remove", help="forget a registered agent")
    remove.add_argument("name", help="the agent's local name")
    remove.add_argument("--json", action="store_true", help="print what was removed as JSON")
    credential = agents_commands.add_parser(
        "audit-credential",
        help="the token of this agent's audit routes, for `audit reconcile`",
        description="Tie a bearer token to ONE agent's audit routes. `audit reconcile` sends "
        "it only to the origin (scheme, host, port) of the card URL this agent is registered "
        "from now, never to a URL from a card or receipt, never to another agent; if the "
        "agent is registered anew from another origin it must be set again. Kept in the "
        "data directory's audit-credentials.json (mode 0600), never printed. There is no "
        "token for every agent: FEDERATION_REMOTE_AUDIT_TOKEN is not used.",
    )
    credential.add_argument("name", help="the agent's local name")
    given = credential.add_mutually_exclusive_group(required=True)
    given.add_argument(
        "--token-file", type=Path, metavar="FILE", help="a file holding the token (- : stdin)"
    )
    given.add_argument("--remove", action="store_true", help="forget this agent's token")
    credential.add_argument("--json", action="store_true", help="print the result as JSON")

    delegate = commands.add_parser("delegate", help="one handoff to a registered agent")
    delegate.add_argument("--to", required=True, metavar="NAME", help="a registered agent")
    delegate.add_argument("--skill", required=True, metavar="SKILL_ID", help="one of its skills")
    delegate.add_argument(
        "--input",
        required=True,
        metavar="FILE.json",
        type=Path,
        help="the JSON object to send (- reads standard input)",
    )
    delegate.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="the handoff's deadline"
    )
    delegate.add_argument(
        "--cancel-after", type=float, metavar="SECONDS", help="cancel the run after this long"
    )
    delegate.add_argument(
        "--principal", help="who the work is done for (default: the run's own principal)"
    )
    delegate.add_argument("--tenant", default="default", help="whose data it may touch")
    delegate.add_argument("--json", action="store_true", help="print the run document")
    return_options.add_delegate_options(delegate)
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script",
        description='Print a completion script: eval "$(federation completion bash)"',
    )
    completion.add_argument("shell", choices=["bash", "zsh", "tcsh"], help="which shell")
    return parser
