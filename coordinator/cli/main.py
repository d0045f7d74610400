"""The ``federation`` command line.

Every failure the user can cause or meet (a bad URL, a card that is not JSON, an agent
that is not registered, a remote error) ends with one line on stderr and exit status 2,
never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_cards.keys import TrustedKeys
from contracts import strict_json
from coordinator.assessment.demo import (
    demo_document,
    prepare_trust,
    remote_risk_process,
    render,
    run_demo,
)
from coordinator.assessment.model_gateway import ModelConfig
from coordinator.assessment.scenario import CASES
from coordinator.audit import ledger
from coordinator.audit.trail import reconstruct, render_reconstruction
from coordinator.authority import identity
from coordinator.dispatch.delegate import DelegationOrder, delegate_once, delegation_document
from coordinator.errors import FederationError, UsageError
from coordinator.handoff.documents import render_document, run_document
from coordinator.recovery.recover import recover
from coordinator.recovery.worker import Worker
from coordinator.remote.client import A2AClient
from coordinator.remote.registry import Registration, Registry, TrustAnchor
from coordinator.service.workspace import DATABASE_ENV, Workspace
from coordinator.storage import datadir
from coordinator.storage.datadir import DataDir


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="federation", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help=f"where state is kept (env {datadir.ENV_VAR})")
    parser.add_argument(
        "--database-url",
        help=f"PostgreSQL instead of the data directory's SQLite (env {DATABASE_ENV})",
    )
    parser.add_argument(
        "--server",
        metavar="URL",
        help="send register, agents, delegate, runs, run and audit to a running coordinator "
        "(env FEDERATION_SERVER; token from FEDERATION_OPERATOR_TOKEN[_FILE])",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="run the pilot assessment against remote_risk")
    demo.add_argument("--case", choices=[*CASES, "all"], default="all")
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
        "the service's own (see `federation serve risk --help`).",
    )
    serve.add_argument("service", choices=["risk", "coordinator"])
    serve.add_argument("service_args", nargs=argparse.REMAINDER)

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

    commands.add_parser(
        "recover", help="continue every in-flight handoff left by a coordinator that stopped"
    )
    worker = commands.add_parser(
        "worker", help="drive in-flight handoffs from the shared database until stopped"
    )
    worker.add_argument("--lease-seconds", type=float, default=10.0)
    runs = commands.add_parser("runs", help="list recorded runs")
    runs.add_argument("--json", action="store_true")
    run = commands.add_parser("run", help="inspect one run")
    run_commands = run.add_subparsers(dest="run_command", required=True)
    show = run_commands.add_parser("show", help="ownership, artifacts, budget, pending")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true")

    audit = commands.add_parser("audit", help="the tamper-evident audit ledger")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    verify = audit_commands.add_parser("verify", help="check the whole hash chain")
    verify.add_argument("--bundle", type=Path, metavar="FILE", help="check an exported bundle")
    audit_show = audit_commands.add_parser("show", help="rebuild a run from the ledger alone")
    audit_show.add_argument("run_id")
    audit_show.add_argument("--json", action="store_true")
    export = audit_commands.add_parser("export", help="a self-contained, signed run bundle")
    export.add_argument("run_id")
    export.add_argument("--output", type=Path, metavar="FILE", help="default: stdout")

    keys = commands.add_parser("keys", help="the coordinator's signing keys")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True)
    keys_commands.add_parser("show", help="print the public JWK Set (what remotes pin)")
    rotate = keys_commands.add_parser("rotate", help="add a new active signing key")
    rotate.add_argument(
        "--grace-seconds",
        type=int,
        default=3600,
        help="how long the previous key keeps verifying (default 3600)",
    )

    agents = commands.add_parser("agents", help="list registered agents")
    agents.add_argument("--json", action="store_true")

    delegate = commands.add_parser("delegate", help="one handoff to a registered agent")
    delegate.add_argument("--to", required=True, metavar="NAME")
    delegate.add_argument("--skill", required=True, metavar="SKILL_ID")
    delegate.add_argument("--input", required=True, metavar="FILE.json", type=Path)
    delegate.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="the handoff's deadline"
    )
    delegate.add_argument(
        "--cancel-after", type=float, metavar="SECONDS", help="cancel the run after this long"
    )
    delegate.add_argument("--principal", default="operator", help="who the work is done for")
    delegate.add_argument("--tenant", default="default", help="whose data it may touch")
    delegate.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    data = DataDir(datadir.resolve(args.data_dir))
    try:
        from coordinator.cli import remote as remote_cli

        server = remote_cli.server_url(args)
        if server and (args.server or args.command in remote_cli.COMMANDS):
            return remote_cli.run(args, server)
        return int(COMMANDS[args.command](args, Workspace.resolve(data, args.database_url)))
    except FederationError as exc:
        print(f"federation: error: {exc} [{exc.reason}]", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("federation: interrupted", file=sys.stderr)
        return 130


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def cmd_demo(args: argparse.Namespace, ws: Workspace) -> int:
    data = ws.data
    cases = list(CASES) if args.case == "all" else [args.case]
    if args.model:
        return _demo_with_model(args, data, cases)
    trust = prepare_trust(data)
    store = ws.run_store()
    with remote_risk_process(trust.remote_args) as base_url:
        results = asyncio.run(
            run_demo(
                data,
                base_url,
                cases,
                trust,
                parallel=args.parallel,
                trail=ws.trail(),
                store=store,
            )
        )
    for result in results:
        result.run.save(run_document(result.run, case=result.case))
    if args.json:
        _print_json(demo_document(results))
    else:
        print(f"remote_risk was started at {base_url} and registered from its card\n")
        print("\n\n".join(render(result) for result in results))
    return 0


def _model_config() -> ModelConfig:
    config = ModelConfig.from_env()
    if config is None:
        raise UsageError(
            "--model needs FEDERATION_MODEL_BASE_URL, FEDERATION_MODEL and "
            "FEDERATION_MODEL_API_KEY in the environment",
            "model_not_configured",
        )
    return config


def _demo_with_model(args: argparse.Namespace, data: DataDir, cases: list[str]) -> int:
    from coordinator.assessment import evaluate, supervisor
    from coordinator.assessment.demo import prepare_trust

    config = _model_config()
    trust = prepare_trust(data)
    with remote_risk_process(trust.remote_args) as base_url:
        results = asyncio.run(
            evaluate.model_demo(data, base_url, trust, config, cases, parallel=args.parallel)
        )
    for result in results:
        data.write_json(result.as_dict(), "runs", f"supervised-{uuid.uuid4().hex[:12]}.json")
    if args.json:
        _print_json({"model": config.describe(), "cases": [r.as_dict() for r in results]})
    else:
        print(f"supervisor model {config.model}; remote_risk started at {base_url}\n")
        print("\n\n".join(supervisor.render(result) for result in results))
    return 0


def cmd_evaluate(args: argparse.Namespace, ws: Workspace) -> int:
    data = ws.data
    from coordinator.assessment import evaluate

    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1", "usage_error")
    config = _model_config() if args.model else None
    rows = evaluate.run_evaluation(data, config, args.repeat)
    if args.json:
        _print_json(evaluate.document(rows, config))
    else:
        print(evaluate.render(rows, config))
    return 0 if all(row.passed for row in rows) else 1


def cmd_serve(args: argparse.Namespace, ws: Workspace) -> int:
    if args.service == "coordinator":
        from coordinator.service.server import main as serve_coordinator

        return serve_coordinator(args.service_args, ws)
    from remote_risk.__main__ import main as serve_risk

    serve_risk(args.service_args)
    return 0


def _anchor(args: argparse.Namespace) -> TrustAnchor:
    keys = None
    if args.trust_key is not None:
        try:
            keys = TrustedKeys.from_file(args.trust_key)
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"cannot use {args.trust_key} as a trusted key: {exc}", "trust_key_unusable"
            ) from None
    return TrustAnchor(keys, args.expect_kid, args.trust_on_first_use)


def cmd_register(args: argparse.Namespace, ws: Workspace) -> int:
    data = ws.data
    anchor = _anchor(args)

    async def register() -> Registration:
        async with A2AClient() as client:
            registry = Registry(data, ws.trail("operator"), ws.run_store())
            return await registry.register(
                client, args.url, args.name, args.skill, anchor, args.approve
            )

    registration = asyncio.run(register())
    agent = registration.agent
    if registration.status == "pending_approval":
        print(
            f"{agent.name}: the card changed and asks for more than before; it is held as "
            f"pending. Review it, then run: federation register {args.url} --approve",
            file=sys.stderr,
        )
        return 1
    print(
        f"{registration.status} {agent.name}: {agent.endpoint} "
        f"(skills: {', '.join(agent.skill_ids())}; card signed by {agent.verified_kid}, "
        f"trust: {agent.trust})"
    )
    return 0


def cmd_keys(args: argparse.Namespace, ws: Workspace) -> int:
    data = ws.data
    if args.keys_command == "rotate":
        keys = identity.rotate(data, args.grace_seconds)
        print(
            f"active key is now {keys.active.kid}; previous keys verify for "
            f"{args.grace_seconds} s more; public keys in {data.path(identity.JWKS_FILE)}"
        )
        return 0
    _print_json(identity.coordinator_keys(data).public_jwks())
    return 0


def cmd_agents(args: argparse.Namespace, ws: Workspace) -> int:
    data = ws.data
    agents = Registry(data).agents()
    if args.json:
        _print_json(
            [
                {
                    "name": a.name,
                    "endpoint": a.endpoint,
                    "card_url": a.card_url,
                    "skills": a.skill_ids(),
                }
                for a in agents
            ]
        )
        return 0
    if not agents:
        print("no agents registered")
    for agent in agents:
        print(f"{agent.name}\t{agent.endpoint}\tskills: {', '.join(agent.skill_ids())}")
    return 0


def _read_input(path: Path) -> dict[str, Any]:
    try:
        value = strict_json.loads(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", "input_unreadable") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not strict JSON: {exc}", "input_not_json") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path} must hold a JSON object", "input_not_object")
    return value


def cmd_delegate(args: argparse.Namespace, ws: Workspace) -> int:
    data = ws.data
    payload = _read_input(args.input)
    order = DelegationOrder(
        agent=Registry(data).get(args.to),
        skill=args.skill,
        payload=payload,
        timeout=args.timeout,
        cancel_after=args.cancel_after,
        principal=args.principal,
        tenant=args.tenant,
    )
    keys = identity.coordinator_keys(data)
    store = ws.run_store()
    run, outcome = asyncio.run(delegate_once(order, keys, identity.issuer_id(), ws.trail(), store))
    document = delegation_document(run, outcome)
    run.save(document)
    if args.json:
        _print_json(document)
    else:
        _print_delegation(document)
    return 0 if outcome.record.state.value == "ACCEPTED" else 1


def _print_delegation(document: dict[str, Any]) -> None:
    print(f"run {document['run_id']} handoff {document['handoff_id']} -> {document['target']}")
    print(f"remote task {document['remote_task_id'] or '-'}: {document['remote_state'] or '-'}")
    print(f"local state: {document['local_state']} ({document['reason']})")
    for note in document["notes"]:
        print(f"note: {note}")
    for artifact in document["artifacts"]:
        print(f"artifact {artifact['decision']} ({artifact['reason']}) {artifact['content_hash']}")
    for artifact in document["received_artifacts"]:
        print(f"received {artifact['artifactId']}:")
        for part in artifact["parts"]:
            shown = {k: v for k, v in part.items() if k in ("text", "data", "url", "raw")}
            print(f"  {json.dumps(shown, ensure_ascii=False)}")


def cmd_runs(args: argparse.Namespace, ws: Workspace) -> int:
    print_runs(ws.run_store().run_documents(), as_json=args.json)
    return 0


def print_runs(documents: list[dict[str, Any]], *, as_json: bool) -> None:
    """``federation runs``, from this data directory or a coordinator's API."""
    if as_json:
        _print_json([{k: d.get(k) for k in ("run_id", "owner", "cancelled")} for d in documents])
        return
    if not documents:
        print("no runs recorded")
    for d in documents:
        live = len(d.get("live_branches", []))
        branches = len(d.get("branches", []))
        print(
            f"{d['run_id']}\towner {d['owner']}\t{branches} branches, {live} live"
            f"{chr(9) + 'cancelled' if d.get('cancelled') else ''}"
        )


def cmd_run(args: argparse.Namespace, ws: Workspace) -> int:
    row = ws.run_store().run(args.run_id)
    if row is None:
        raise UsageError(f"no run {args.run_id!r} in the database", "unknown_run")
    document = row["document"]
    if args.json:
        _print_json(document)
    else:
        print(render_document(document))
    return 0


def cmd_worker(args: argparse.Namespace, ws: Workspace) -> int:
    keys = identity.coordinator_keys(ws.data)
    worker = Worker(ws, keys, identity.issuer_id(), lease_seconds=args.lease_seconds)
    print(f"worker {worker.driver} driving handoffs", flush=True)

    async def work() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, worker.stop)
        await worker.run()

    asyncio.run(work())
    print(f"worker stopped after driving {worker.driven} handoffs", flush=True)
    return 0


def cmd_recover(args: argparse.Namespace, ws: Workspace) -> int:
    keys = identity.coordinator_keys(ws.data)
    outcomes = asyncio.run(recover(ws, keys, identity.issuer_id()))
    if not outcomes:
        print("nothing in flight")
    for outcome in outcomes:
        record = outcome.record
        print(
            f"{record.run_id} {record.attempt_id} -> {record.target}: "
            f"{record.state.value} ({record.reason})"
        )
    return 0


def cmd_audit(args: argparse.Namespace, ws: Workspace) -> int:
    if args.audit_command == "verify":
        if args.bundle is not None:
            report = ledger.verify_bundle(_read_bundle(args.bundle))
            where = f"bundle {args.bundle}"
        else:
            report = ledger.verify(ws.engine())
            where = "ledger"
        print(f"{where}: {report}")
        return 0 if report.ok else 1
    events = ws.ledger().events(args.run_id)
    if not events:
        raise UsageError(f"the ledger has no events of run {args.run_id!r}", "unknown_run")
    if args.audit_command == "show":
        view = reconstruct(events)
        if args.json:
            _print_json(view)
        else:
            print(render_reconstruction(view))
        return 0
    keys = identity.coordinator_keys(ws.data)
    private_key = keys.active.private_key
    if not isinstance(private_key, Ed25519PrivateKey):
        raise UsageError("exporting a bundle needs an Ed25519 coordinator key", "key_unsupported")
    bundle = ledger.export_bundle(
        ws.ledger(), args.run_id, private_key, issuer=identity.issuer_id()
    )
    text = json.dumps(bundle, indent=2, ensure_ascii=False)
    if args.output is None:
        print(text)
    else:
        args.output.write_text(text + "\n")
        print(f"wrote {args.output} ({len(bundle.get('events', []))} events, signed head)")
    return 0


def _read_bundle(path: Path) -> dict[str, Any]:
    try:
        value = strict_json.loads(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", "bundle_unreadable") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not strict JSON: {exc}", "bundle_not_json") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path} is not a bundle", "bundle_not_json")
    return value


COMMANDS = {
    "demo": cmd_demo,
    "evaluate": cmd_evaluate,
    "serve": cmd_serve,
    "register": cmd_register,
    "agents": cmd_agents,
    "delegate": cmd_delegate,
    "keys": cmd_keys,
    "runs": cmd_runs,
    "audit": cmd_audit,
    "recover": cmd_recover,
    "worker": cmd_worker,
    "run": cmd_run,
}
