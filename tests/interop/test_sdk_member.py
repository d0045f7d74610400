"""A stock a2a-sdk 1.3 agent made a member with the kit in-process (examples/sdk_member.py).

Real processes: the example as its own process (the SDK's request handler, task store
and executor as the SDK's quickstart writes them, governed by :mod:`member_kit.sdk`,
trusting the coordinator's JWK Set), and the coordinator's CLI for
every operator step. The member is registered with its key pinned (``--expect-kid``);
a delegation is ACCEPTED with a receipt by that member's key; ``audit reconcile`` agrees
with the member's decision log; a proof bundle verifies with that member's key alone.
The glue that makes the agent a member is at most ten lines. The token-attack suites
run against the same example in-process on JSON-RPC, HTTP+JSON and gRPC
(``tests/members.py``, member ``sdk``).
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_cards.keys import load_key_set
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.storage.datadir import DataDir
from tests.interop.test_guard import _first_line, _standalone, _start, _stop, cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "sdk_member.py"
AUDIT_TOKEN = secrets.token_urlsafe(32)
GLUE_BEGINS, GLUE_ENDS = "# --- glue:", "# --- end of glue ---"
MAX_GLUE_LINES = 10
ANSWER_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["shout", "length"],
    "additionalProperties": False,
    "properties": {"shout": {"type": "string"}, "length": {"type": "integer", "minimum": 0}},
}


@dataclass
class Member:
    data: DataDir
    url: str
    directory: Path


@pytest.fixture
def member(tmp_path: Path) -> Iterator[Member]:
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)
    directory = tmp_path / "member"
    args = [
        sys.executable, str(EXAMPLE), "--data-dir", str(directory),
        "--trust-issuer", f"{DEFAULT_ISSUER}={data.path('jwks.json')}",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GUARD_AUDIT_TOKEN": AUDIT_TOKEN}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with (tmp_path / "member.log").open("w") as log:
        process = _start(args, log, env)
    try:
        yield Member(data, _first_line(process, "sdk-member listening on "), directory)
    finally:
        _stop(process)


def test_a_stock_sdk_agent_with_the_kit_joins_and_is_audited(
    member: Member, tmp_path: Path
) -> None:
    data = member.data
    keys = load_key_set(member.directory / "keys")
    schema = tmp_path / "answer.schema.json"
    schema.write_text(json.dumps(ANSWER_SCHEMA))
    code, out, err = cli(
        data, "register", member.url, "--name", "shouter", f"--expect-kid={keys.active.kid}",
        "--return-schema", f"shout={schema}",
    )  # fmt: skip
    assert code == 0, (out, err)

    payload = tmp_path / "input.json"
    payload.write_text(json.dumps({"text": "the quick brown fox"}))
    code, out, err = cli(
        data, "delegate", "--to", "shouter", "--skill", "shout", "--input", str(payload), "--json"
    )
    document = json.loads(out)
    assert (code, document["local_state"]) == (0, "ACCEPTED"), (document, err)
    (branch,) = document["branches"]
    assert branch["reason"] == "schema_matched"
    run_id = document["run_id"]

    secret = tmp_path / "audit.token"
    secret.write_text(AUDIT_TOKEN + "\n")
    assert cli(data, "agents", "audit-credential", "shouter", "--token-file", str(secret))[0] == 0
    code, out, err = cli(data, "audit", "reconcile", run_id, "--json")
    report = json.loads(out)
    assert (code, report["agree"]) == (0, True), (report, err)
    (handoff,) = report["handoffs"]
    assert handoff["agent"] == "shouter" and handoff["agree"] is True

    bundle = tmp_path / "bundle.json"
    assert cli(data, "audit", "prove", run_id, "--output", str(bundle))[0] == 0
    assert "handoff.receipt" in bundle.read_text()
    coordinator_key = tmp_path / "coordinator.json"
    coordinator_key.write_text(json.dumps(coordinator_keys(data).public_jwks()))
    member_key = tmp_path / "member.json"
    member_key.write_text(json.dumps(keys.public_jwks()))
    verdict = _standalone(
        bundle, "--coordinator-key", str(coordinator_key), "--remote-key", str(member_key)
    )
    assert verdict["ok"] is True and verdict["anchored"] is True, verdict
    without = _standalone(bundle, "--coordinator-key", str(coordinator_key))
    assert without["reason"] == "untrusted_key"


def glue_lines(source: str) -> list[str]:
    """The lines of code (not blank, not comments) between the example's glue markers."""
    lines = source.splitlines()
    begin = next(i for i, line in enumerate(lines) if line.startswith(GLUE_BEGINS))
    end = lines.index(GLUE_ENDS)
    return [
        line
        for line in lines[begin + 1 : end]
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_the_glue_is_at_most_ten_lines_and_the_agent_is_the_sdks() -> None:
    """The example's glue (plus its one call in ``__main__``) is at most ten lines; the
    agent itself is the SDK's own request handler and task store."""
    source = EXAMPLE.read_text()
    main_calls = [line for line in source.splitlines() if "serve_member(" in line]
    assert len(glue_lines(source)) + len(main_calls) <= MAX_GLUE_LINES
    called = {
        node.func.id
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert {"DefaultRequestHandler", "InMemoryTaskStore", "govern"} <= called
