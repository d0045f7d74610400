"""The CLI's commands against a running coordinator (``--server URL``).

Each command sends what the local command would do to the coordinator's API
(:mod:`coordinator.cli.api_client`) and prints the answer exactly as the local command prints
its own result. Files named on the command line (``--input``, ``--trust-key``,
``--bundle``, ``--output``) are read and written here, on the caller's machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from contracts import strict_json
from coordinator.audit.trail import render_reconstruction
from coordinator.cli import main as cli
from coordinator.cli.api_client import CoordinatorClient
from coordinator.errors import UsageError
from coordinator.handoff.documents import render_document
from coordinator.service.settings import load_client_settings

RemoteCommand = Callable[[argparse.Namespace, CoordinatorClient], int]


def server_url(args: argparse.Namespace) -> str | None:
    """The coordinator to talk to: ``--server``, else ``FEDERATION_SERVER``, else none."""
    return load_client_settings(server=getattr(args, "server", None)).server or None


def run(args: argparse.Namespace, server: str) -> int:
    command = COMMANDS.get(args.command)
    if command is None:
        raise UsageError(
            f"`federation {args.command}` works on a data directory only; drop --server",
            "server_unsupported",
        )
    token = load_client_settings().required_token("--server")
    with CoordinatorClient(server, token) as client:
        return command(args, client)


def cmd_register(args: argparse.Namespace, client: CoordinatorClient) -> int:
    body: dict[str, Any] = {"url": args.url, "approve": args.approve}
    if args.name is not None:
        body["name"] = args.name
    if args.skill is not None:
        body["skill"] = args.skill
    if args.trust_key is not None:
        body["trust_key"] = _read_object(args.trust_key, "trust_key_unusable")
    if args.expect_kid is not None:
        body["expect_kid"] = args.expect_kid
    if args.trust_on_first_use:
        body["trust_on_first_use"] = True
    registration = client.register(body)
    agent = registration["agent"]
    if registration["status"] == "pending_approval":
        print(
            f"{agent['name']}: the card changed and asks for more than before; it is held as "
            f"pending. Review it, then run: federation register {args.url} --approve",
            file=sys.stderr,
        )
        return 1
    print(
        f"{registration['status']} {agent['name']}: {agent['endpoint']} "
        f"(skills: {', '.join(agent['skills'])}; card signed by {agent['verified_kid']}, "
        f"trust: {agent['trust']})"
    )
    return 0


def cmd_agents(args: argparse.Namespace, client: CoordinatorClient) -> int:
    agents = client.agents()
    if args.json:
        keys = ("name", "endpoint", "card_url", "skills")
        cli._print_json([{key: agent[key] for key in keys} for agent in agents])
        return 0
    if not agents:
        print("no agents registered")
    for agent in agents:
        print(f"{agent['name']}\t{agent['endpoint']}\tskills: {', '.join(agent['skills'])}")
    return 0


def cmd_delegate(args: argparse.Namespace, client: CoordinatorClient) -> int:
    body: dict[str, Any] = {
        "to": args.to,
        "skill": args.skill,
        "input": cli._read_input(args.input),
        "timeout": args.timeout,
        "principal": args.principal,
        "tenant": args.tenant,
        "wait": True,
    }
    if args.cancel_after is not None:
        body["cancel_after"] = args.cancel_after
    document = client.delegate(body)
    if args.json:
        cli._print_json(document)
    else:
        cli._print_delegation(document)
    return 0 if document.get("local_state") == "ACCEPTED" else 1


def cmd_runs(args: argparse.Namespace, client: CoordinatorClient) -> int:
    cli.print_runs(client.runs(), as_json=args.json)
    return 0


def cmd_run(args: argparse.Namespace, client: CoordinatorClient) -> int:
    document = client.run(args.run_id)
    if args.json:
        cli._print_json(document)
    else:
        print(render_document(document))
    return 0


def cmd_audit(args: argparse.Namespace, client: CoordinatorClient) -> int:
    if args.audit_command == "verify":
        bundle = cli._read_bundle(args.bundle) if args.bundle is not None else None
        report = client.audit_verify(bundle)
        where = f"bundle {args.bundle}" if args.bundle is not None else "ledger"
        print(f"{where}: {report['summary']}")
        return 0 if report["ok"] else 1
    if args.audit_command == "show":
        view = client.audit_show(args.run_id)
        if args.json:
            cli._print_json(view)
        else:
            print(render_reconstruction(view))
        return 0
    bundle = client.audit_export(args.run_id)
    text = json.dumps(bundle, indent=2, ensure_ascii=False)
    if args.output is None:
        print(text)
    else:
        args.output.write_text(text + "\n")
        print(f"wrote {args.output} ({len(bundle.get('events', []))} events, signed head)")
    return 0


def _read_object(path: Any, reason: str) -> dict[str, Any]:
    try:
        value = strict_json.loads(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", reason) from None
    except ValueError as exc:
        raise UsageError(f"{path} is not strict JSON: {exc}", reason) from None
    if not isinstance(value, dict):
        raise UsageError(f"{path} must hold a JSON object", reason)
    return value


COMMANDS: dict[str, RemoteCommand] = {
    "register": cmd_register,
    "agents": cmd_agents,
    "delegate": cmd_delegate,
    "runs": cmd_runs,
    "run": cmd_run,
    "audit": cmd_audit,
}
