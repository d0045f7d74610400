"""One function per ``federation`` command: read the arguments, ask, print.

Commands that a running coordinator also answers (register, agents, delegate, runs, run,
audit) take a :class:`~coordinator.cli.backends.Coordinator`, local or remote, and are
written once. The rest work on this machine's workspace through the same service. The
``audit`` commands are in :mod:`coordinator.cli.audit_commands`; the files a command
reads, in :mod:`coordinator.cli.inputs`.
"""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from coordinator import loop as event_loop
from coordinator.cli import printers
from coordinator.cli.audit_commands import cmd_audit
from coordinator.cli.backends import Coordinator, Local
from coordinator.cli.inputs import (
    delegation_schema,
    read_object,
    read_secret,
    registration_schemas,
    request,
)
from coordinator.errors import UsageError

if TYPE_CHECKING:  # each command imports what only it uses (start-up time)
    from coordinator.assessment.model_gateway import ModelConfig

# `delegate`: the remote stopped to ask for input or authorisation (see README, exit codes).
ASKED_EXIT_CODE = 4
Shared = Callable[[argparse.Namespace, Coordinator], int]
# the service is opened when a command first uses it, after its own checks
LocalOnly = Callable[[argparse.Namespace, Local], int]


# --- shared by local and --server ----------------------------------------------------------


def cmd_register(args: argparse.Namespace, coordinator: Coordinator) -> int:
    from coordinator.service.api_requests import RegisterRequest

    trust_key = None
    if args.trust_key is not None:
        trust_key = read_object(args.trust_key, "trust_key")
    registration = request(
        RegisterRequest,
        url=args.url,
        name=args.name,
        skill=args.skill,
        trust_key=trust_key,
        expect_kid=args.expect_kid,
        trust_on_first_use=args.trust_on_first_use,
        approve=args.approve,
        return_schemas=registration_schemas(args),
        return_finding=args.return_finding,
        allow_origins=args.allow_origin,
        take_address_from=args.take_address_from,
    )
    answer = coordinator.register(registration)
    if args.json:
        printers.print_json(answer)
        return 1 if answer["status"] == "pending_approval" else 0
    return printers.print_registration(answer, args.url)


def cmd_agents(args: argparse.Namespace, coordinator: Coordinator) -> int:
    if args.agents_command == "show":
        agent = coordinator.agent(args.name)
        if args.json:
            printers.print_json(agent)
        else:
            print(printers.render_agent(agent))
        return 0
    if args.agents_command == "pending":
        held = coordinator.pending()
        if args.json:
            printers.print_json(held)
        else:
            print(printers.render_pending(held))
        return 0
    if args.agents_command == "refuse":
        kept = coordinator.refuse_pending(args.name)
        if args.json:
            printers.print_json(kept)
        else:
            print(f"refused the card held for {kept['name']}; its registered card stays")
        return 0
    if args.agents_command == "audit-credential":
        return cmd_audit_credential(args, coordinator)
    if args.agents_command == "remove":
        removed = coordinator.remove_agent(args.name)
        if args.json:
            printers.print_json(removed)
        else:
            print(f"removed {removed['name']} ({removed['card_url']})")
        return 0
    printers.print_agents(coordinator.agents(), as_json=args.json)
    return 0


def cmd_audit_credential(args: argparse.Namespace, coordinator: Coordinator) -> int:
    """``agents audit-credential NAME --token-file FILE | --remove``: never echoes it."""
    if args.remove:
        answer = coordinator.remove_audit_credential(args.name)
        line = f"{args.name}: audit credential " + ("removed" if answer["removed"] else "none set")
    else:
        answer = coordinator.set_audit_credential(args.name, read_secret(args.token_file))
        line = f"{args.name}: audit credential set, sent only to {answer['origin']}"
    if args.json:
        printers.print_json(answer)
    else:
        print(line)
    return 0


def cmd_delegate(args: argparse.Namespace, coordinator: Coordinator) -> int:
    from coordinator.cli.progress import exit_status, reporter
    from coordinator.service.api_requests import DelegationRequest

    delegation = request(
        DelegationRequest,
        to=args.to,
        skill=args.skill,
        input=read_object(args.input, "input"),
        timeout=args.timeout,
        cancel_after=args.cancel_after,
        principal=args.principal,
        tenant=args.tenant,
        return_schema=delegation_schema(args),
    )
    document = coordinator.delegate(delegation, reporter(args.json))
    if args.json:
        printers.print_json(document)
    else:
        printers.print_delegation(document)
    return exit_status(document, asked=ASKED_EXIT_CODE)


def cmd_runs(args: argparse.Namespace, coordinator: Coordinator) -> int:
    from coordinator.service.run_list import RunQuery

    query = RunQuery(state=args.state, since=args.since, limit=args.limit, cursor=args.cursor)
    printers.print_runs(coordinator.runs(query), as_json=args.json, state=args.state)
    return 0


def cmd_run(args: argparse.Namespace, coordinator: Coordinator) -> int:
    document = coordinator.run(args.run_id)
    if args.artifact is not None:
        print(printers.whole_artifact(document, args.artifact))
    elif args.json:
        printers.print_json(document)
    else:
        print(printers.render_document(document))
    return 0


def cmd_cancel(args: argparse.Namespace, coordinator: Coordinator) -> int:
    document = coordinator.cancel(args.run_id, args.reason)
    if args.json:
        printers.print_json(document)
    else:
        print(printers.render_cancel(document))
    return 0


def cmd_revoke(args: argparse.Namespace, coordinator: Coordinator) -> int:
    revocation = coordinator.revoke(args.target, args.reason)
    if args.json:
        printers.print_json(revocation)
    else:
        print(printers.render_revocation(revocation))
    return 0


def cmd_keys(args: argparse.Namespace, coordinator: Coordinator) -> int:
    from coordinator.authority import identity

    if args.keys_command == "rotate":
        if not isinstance(coordinator, Local):
            raise UsageError(
                "keys rotate works on a data directory only; drop --server", "server_unsupported"
            )
        data = coordinator.service.ws.data
        if args.activate:
            keys = identity.activate(data)
            print(f"active key is now {keys.active.kid}; the previous key verifies as scheduled")
            print(identity.AT_ONCE_NOTE)
            return 0
        keys = identity.rotate(data, args.grace_seconds, args.publish_seconds)
        if keys.published is None:
            print(
                f"active key is now {keys.active.kid}; previous keys verify for "
                f"{args.grace_seconds} s more; public keys in {data.path(identity.JWKS_FILE)}"
            )
            print(identity.AT_ONCE_NOTE)
        else:
            print(
                f"published key {keys.published.key.kid}; it signs from "
                f"{keys.published.activates_at} (or after `keys rotate --activate`); "
                f"public keys in {data.path(identity.JWKS_FILE)}"
            )
        return 0
    printers.print_json(coordinator.jwks())
    return 0


SHARED: dict[str, Shared] = {
    "register": cmd_register,
    "agents": cmd_agents,
    "delegate": cmd_delegate,
    "runs": cmd_runs,
    "run": cmd_run,
    "cancel": cmd_cancel,
    "revoke": cmd_revoke,
    "audit": cmd_audit,
    "keys": cmd_keys,
}


# --- this machine only ---------------------------------------------------------------------


def _model_config() -> ModelConfig:
    from coordinator.assessment.model_gateway import ModelConfig

    config = ModelConfig.from_env()
    if config is None:
        raise UsageError(
            "--model needs FEDERATION_MODEL_BASE_URL, FEDERATION_MODEL and "
            "FEDERATION_MODEL_API_KEY in the environment",
            "model_not_configured",
        )
    return config


def cmd_demo(args: argparse.Namespace, local: Local) -> int:

    from coordinator.assessment.chain_case import CASE as CHAIN_CASE
    from coordinator.assessment.scenario import CASES, EXPECTED_STATUS
    from coordinator.cli import demo_printers

    if args.model and args.case == CHAIN_CASE:
        raise UsageError("--model supervises the pilot cases, not the chain", "usage_error")
    cases = [*CASES, CHAIN_CASE] if args.case == "all" else [args.case]
    chain = CHAIN_CASE in cases
    cases = [case for case in cases if case != CHAIN_CASE]
    if args.model:
        return _demo_with_model(args, local, cases)
    from coordinator.assessment.demo import demo_document

    base_url, results = (
        event_loop.run(local.service.demo(cases, parallel=args.parallel)) if cases else ("", [])
    )
    chained = [local.service.chain_demo()] if chain else []
    expected = [r.assessment.status.value == EXPECTED_STATUS[r.case] for r in results]
    expected += [c.as_expected for c in chained]
    if args.json:
        document = demo_document(results)
        document["cases"] += [c.as_dict() for c in chained]
        printers.print_json({**document, "as_expected": sum(expected)})
    else:
        if results:
            print(f"remote_risk was started at {base_url} and registered from its card\n")
        texts = [demo_printers.render_case(r) for r in results]
        texts += [demo_printers.render_chain_case(c) for c in chained]
        print("\n\n".join(texts))
        print(f"\n{sum(expected)}/{len(expected)} cases as expected")
    return 0 if all(expected) else 1


def _demo_with_model(args: argparse.Namespace, local: Local, cases: list[str]) -> int:
    from coordinator.cli import demo_printers

    config = _model_config()
    base_url, results = event_loop.run(
        local.service.supervised_demo(cases, config, parallel=args.parallel)
    )
    if args.json:
        printers.print_json({"model": config.describe(), "cases": [r.as_dict() for r in results]})
    else:
        print(f"supervisor model {config.model}; remote_risk started at {base_url}\n")
        print("\n\n".join(demo_printers.render_supervised(result) for result in results))
    return 0


def cmd_evaluate(args: argparse.Namespace, local: Local) -> int:
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1", "usage_error")
    from coordinator.assessment.evaluation_report import document
    from coordinator.cli import demo_printers

    config = _model_config() if args.model else None
    rows = local.service.evaluate(config, args.repeat)
    if args.json:
        printers.print_json(document(rows, config))
    else:
        print(demo_printers.render_evaluation(rows, config))
    return 0 if all(row.passed for row in rows) else 1


def cmd_serve(args: argparse.Namespace, local: Local) -> int:
    if args.service == "coordinator":
        from coordinator.console.app import Console
        from coordinator.service.http.server import main as serve_coordinator

        # the operator console at /console, beside the API (issue 21)
        return serve_coordinator(args.service_args, local.service.ws, [Console()])
    if args.service == "guard":
        # the kit's guard sidecar in front of an A2A agent (its own --data-dir)
        from member_kit.guard.main import main as serve_guard

        serve_guard(args.service_args)
        return 0
    # Starting the risk team's service is the one place the CLI reaches into it.
    from remote_risk.__main__ import main as serve_risk

    serve_risk(risk_arguments(args.service_args, local.service.ws.data.path("remote-risk")))
    return 0


def risk_arguments(given: list[str], default_dir: Path) -> list[str]:
    """``serve risk`` keeps its state under this data directory (``remote-risk/``) unless
    its own ``--data-dir`` or ``REMOTE_RISK_DATA_DIR`` says otherwise."""
    named = any(arg == "--data-dir" or arg.startswith("--data-dir=") for arg in given)
    if named or os.environ.get("REMOTE_RISK_DATA_DIR") or "--help" in given or "-h" in given:
        return list(given)
    return [*given, "--data-dir", str(default_dir)]


def cmd_worker(args: argparse.Namespace, local: Local) -> int:
    import asyncio

    worker = local.service.worker(args.lease_seconds)
    print(f"worker {worker.driver} driving handoffs", flush=True)

    async def work() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, worker.stop)
        await worker.run()

    event_loop.run(work())
    print(f"worker stopped after driving {worker.driven} handoffs", flush=True)
    return 0


def cmd_recover(args: argparse.Namespace, local: Local) -> int:

    outcomes = event_loop.run(local.service.recover())
    if not outcomes:
        print("nothing in flight")
    for outcome in outcomes:
        record = outcome.record
        print(
            f"{record.run_id} {record.attempt_id} -> {record.target}: "
            f"{record.state.value} ({record.reason})"
        )
    return 0


LOCAL_ONLY: dict[str, LocalOnly] = {
    "demo": cmd_demo,
    "evaluate": cmd_evaluate,
    "serve": cmd_serve,
    "worker": cmd_worker,
    "recover": cmd_recover,
}
