"""The ``federation`` command line.

Every failure the user can cause or meet (a bad URL, a card that is not JSON, an agent
that is not registered, a remote error) ends with one line on stderr and exit status 2,
never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contracts import strict_json
from contracts.handoff import HandoffRecord
from coordinator import datadir
from coordinator.client import A2AClient
from coordinator.datadir import DataDir
from coordinator.demo import demo_document, remote_risk_process, render, run_demo
from coordinator.dispatch import RemoteOutcome, WaitPolicy, run_remote_handoff
from coordinator.errors import FederationError, UsageError
from coordinator.model_gateway import ModelConfig
from coordinator.pilot import new_handoff
from coordinator.registry import Registry
from coordinator.runs import Run
from coordinator.scenario import CASES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="federation", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help=f"where state is kept (env {datadir.ENV_VAR})")
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

    serve = commands.add_parser("serve", help="run a service in the foreground")
    serve.add_argument("service", choices=["risk"])
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8081)

    register = commands.add_parser("register", help="fetch, validate and keep an agent card")
    register.add_argument("url", help="the agent's base URL or its agent-card.json URL")
    register.add_argument("--name", help="local name (default: from the card's name)")
    register.add_argument("--skill", help="refuse the card unless it declares this skill")

    agents = commands.add_parser("agents", help="list registered agents")
    agents.add_argument("--json", action="store_true")

    delegate = commands.add_parser("delegate", help="one handoff to a registered agent")
    delegate.add_argument("--to", required=True, metavar="NAME")
    delegate.add_argument("--skill", required=True, metavar="SKILL_ID")
    delegate.add_argument("--input", required=True, metavar="FILE.json", type=Path)
    delegate.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")
    delegate.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    data = DataDir(datadir.resolve(args.data_dir))
    try:
        return int(COMMANDS[args.command](args, data))
    except FederationError as exc:
        print(f"federation: error: {exc} [{exc.reason}]", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("federation: interrupted", file=sys.stderr)
        return 130


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def cmd_demo(args: argparse.Namespace, data: DataDir) -> int:
    cases = list(CASES) if args.case == "all" else [args.case]
    if args.model:
        return _demo_with_model(args, data, cases)
    with remote_risk_process() as base_url:
        results = asyncio.run(run_demo(data, base_url, cases, parallel=args.parallel))
    for result in results:
        data.write_json(result.as_dict(), "runs", f"{result.run.run_id}.json")
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
    from coordinator import evaluate, supervisor
    from coordinator.demo import prepare_trust

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


def cmd_evaluate(args: argparse.Namespace, data: DataDir) -> int:
    from coordinator import evaluate

    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1", "usage_error")
    config = _model_config() if args.model else None
    rows = evaluate.run_evaluation(data, config, args.repeat)
    if args.json:
        _print_json(evaluate.document(rows, config))
    else:
        print(evaluate.render(rows, config))
    return 0 if all(row.passed for row in rows) else 1


def cmd_serve(args: argparse.Namespace, data: DataDir) -> int:
    from remote_risk.app import serve

    serve(host=args.host, port=args.port)
    return 0


def cmd_register(args: argparse.Namespace, data: DataDir) -> int:
    async def register() -> Any:
        async with A2AClient() as client:
            return await Registry(data).register(client, args.url, args.name, args.skill)

    agent = asyncio.run(register())
    print(f"registered {agent.name}: {agent.endpoint} (skills: {', '.join(agent.skill_ids())})")
    return 0


def cmd_agents(args: argparse.Namespace, data: DataDir) -> int:
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


def cmd_delegate(args: argparse.Namespace, data: DataDir) -> int:
    payload = _read_input(args.input)
    agent = Registry(data).get(args.to)
    run = Run(owner="operator")
    record: HandoffRecord = new_handoff(run, agent.name, args.skill)

    async def delegate() -> RemoteOutcome:
        async with A2AClient() as client:
            return await run_remote_handoff(
                client,
                agent,
                record,
                payload,
                sent_record_ids=None,
                wait=WaitPolicy(deadline_seconds=args.timeout),
            )

    outcome = asyncio.run(delegate())
    run.record(outcome.record)
    document = _delegation_document(run, outcome)
    data.write_json(document, "runs", f"{run.run_id}.json")
    if args.json:
        _print_json(document)
    else:
        _print_delegation(document)
    return 0 if outcome.record.state.value == "ACCEPTED" else 1


def _delegation_document(run: Run, outcome: RemoteOutcome) -> dict[str, Any]:
    record = outcome.record
    artifacts = [
        a.model_dump(mode="json", by_alias=True, exclude_none=True)
        for a in (outcome.task.artifacts or [] if outcome.task else [])
    ]
    admission = outcome.admission
    return {
        "run_id": run.run_id,
        "handoff_id": record.handoff_id,
        "target": record.target,
        "skill": record.skill,
        "remote_task_id": record.remote_task_id,
        "remote_state": record.remote_state,
        "local_state": record.state.value,
        "reason": record.reason,
        "admission": None
        if admission is None
        else {
            "admitted": admission.admitted,
            "reason": admission.reason,
            "content_hash": admission.content_hash,
            "size": admission.size,
        },
        "artifacts": artifacts,
        "notes": outcome.notes,
    }


def _print_delegation(document: dict[str, Any]) -> None:
    print(f"run {document['run_id']} handoff {document['handoff_id']} -> {document['target']}")
    print(f"remote task {document['remote_task_id'] or '-'}: {document['remote_state'] or '-'}")
    print(f"local state: {document['local_state']} ({document['reason']})")
    for note in document["notes"]:
        print(f"note: {note}")
    for artifact in document["artifacts"]:
        print(f"artifact {artifact['artifactId']}:")
        for part in artifact["parts"]:
            content = (
                part.get("text")
                if "text" in part
                else json.dumps({k: v for k, v in part.items() if k in ("data", "url", "raw")})
            )
            print(f"  {content}")


COMMANDS = {
    "demo": cmd_demo,
    "evaluate": cmd_evaluate,
    "serve": cmd_serve,
    "register": cmd_register,
    "agents": cmd_agents,
    "delegate": cmd_delegate,
}
