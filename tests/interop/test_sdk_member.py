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
import os
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.storage.datadir import DataDir
from tests.interop.membership import joins_and_is_audited
from tests.interop.test_guard import _first_line, _start, _stop

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
    skill = ("shout", ANSWER_SCHEMA, {"text": "the quick brown fox"})
    keys = member.directory / "keys"
    joins_and_is_audited(member.data, member.url, keys, skill, AUDIT_TOKEN, tmp_path)


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
