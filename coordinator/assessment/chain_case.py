"""The delegation chain as a demo case: three services on loopback, one sub-delegating.

The coordinator's API (``federation serve coordinator`` on the demo's data directory),
the legal team's member (B) and the privacy team's (A, examples/chain_member.py), both
built with the member kit, each run as their own process. B is the kit's guard
(``federation serve guard``) in front of an unmodified a2a-sdk agent
(examples/terms_agent.py, a process of its own); where the a2a-sdk is not installed (it
is the ``sdk`` extra) B is the same skill built on the kit instead
(examples/terms_member.py), and the result says which. Both members are registered
through the API; the operator delegates to A,
whose skill asks B with a child of its own token, minted by the coordinator by token
exchange with its budget carved from A's. The case reads the run back, checks that the
budgets nest exactly, and has the run's proof bundle verified.

``examples/chain_demo.py`` runs the same services through :func:`chain_services`.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agent_cards import tls
from coordinator.authority.identity import issuer_id
from coordinator.errors import FederationError

CASE = "chain"
# The members are the repository's examples (two other teams' code, not the coordinator's).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PRIVACY, TERMS = "privacy-review", "legal-terms"
SKILLS = {PRIVACY: "review-privacy", TERMS: "check-terms"}
INPUT = {"text": "Refunds are handled by the support team.", "terms": ["refund", "warranty"]}
BUDGET_FIELDS = ("actions", "context_units", "effects", "model_requests", "model_tokens")
TERMS_SCOPE = "terms:check"
# The legal team's audit token (examples/terms_member.py reads it) is its guard's, if given.
TERMS_AUDIT_TOKEN, GUARD_AUDIT_TOKEN = "LEGAL_TERMS_AUDIT_TOKEN", "GUARD_AUDIT_TOKEN"


class ChainCaseError(FederationError):
    default_reason = "chain_case_failed"


@contextmanager
def started(*commands: tuple[list[str], Mapping[str, str]]) -> Iterator[list[str]]:
    """The processes of ``commands`` (each with its environment), started at once; yields
    the URL each one's first line says it listens on, and stops them whatever happens."""
    with ExitStack() as stack:
        processes = [stack.enter_context(_process(command, env)) for command, env in commands]
        yield [_listening(process) for process in processes]


@contextmanager
def _process(command: list[str], env: Mapping[str, str]) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(env)
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _listening(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    if " listening on http" not in first:
        args = [str(arg) for arg in process.args]  # type: ignore[union-attr]
        name = next((Path(a).name for a in args if a.endswith(".py")), " ".join(args[1:4]))
        raise ChainCaseError(f"{name} did not start: {first!r}")
    return first.rpartition(" ")[2]


def example_command(script: str, *args: str) -> list[str]:
    """The command of one of the examples on a free loopback port."""
    path = EXAMPLES / script
    if not path.is_file():
        raise ChainCaseError(f"the chain case needs the repository's examples ({script})")
    return [sys.executable, str(path), "--port", "0", *args]


def member_command(script: str, data_dir: Path, trust: str, *extra: str) -> list[str]:
    """The command of one of the examples' members on a free loopback port."""
    return example_command(script, "--data-dir", str(data_dir), "--trust-issuer", trust, *extra)


def guard_command(upstream: str, data_dir: Path, trust: str) -> list[str]:
    """``federation serve guard`` in front of the legal team's agent at ``upstream``."""
    return [
        *(sys.executable, "-m", "coordinator", "serve", "guard", "--upstream", upstream),
        *("--skill-scope", f"{SKILLS[TERMS]}={TERMS_SCOPE}", "--port", "0"),
        *("--data-dir", str(data_dir), "--trust-issuer", trust),
    ]


def guard_available() -> bool:
    """Whether the legal team's stock agent can run (the a2a-sdk is installed)."""
    return importlib.util.find_spec("a2a") is not None


def member_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Another team's process never gets the coordinator's settings (``FEDERATION_*``)."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if not k.startswith("FEDERATION_")}


@dataclass
class ChainServices:
    """The running coordinator API (``url``) and a client holding its operator token."""

    url: str
    client: httpx.Client
    env: dict[str, str] = field(default_factory=dict)
    guarded: bool = False  # the legal team is a stock agent behind the guard

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.client.post(f"{self.url}{path}", json=body)
        if answer.status_code != 200:
            raise ChainCaseError(f"{path}: {answer.status_code} {answer.text}")
        document: dict[str, Any] = answer.json()
        return document

    def get(self, path: str) -> dict[str, Any]:
        answer = self.client.get(f"{self.url}{path}")
        if answer.status_code != 200:
            raise ChainCaseError(f"{path}: {answer.status_code} {answer.text}")
        document: dict[str, Any] = answer.json()
        return document

    def register(self, name: str, address: str) -> None:
        """Register a member from its card; on a data directory the case ran in before, its
        card names a new address: the operator who started it approves the change."""
        self.post("/v1/agents", {
            "url": address, "name": name, "trust_on_first_use": True, "approve": True,
            "return_schemas": {SKILLS[name]: {"type": "object"}},
        })  # fmt: skip

    def delegate(self) -> dict[str, Any]:
        body = {"to": PRIVACY, "skill": SKILLS[PRIVACY], "input": INPUT, "timeout": 60}
        return self.post("/v1/delegations", body)

    def verifies(self, run_id: str) -> bool:
        """Whether the run's proof bundle verifies (every hop, each party's key)."""
        bundle = self.post(f"/v1/audit/runs/{run_id}/prove", {})
        return bool(self.post("/v1/audit/verify", {"bundle": bundle})["ok"])


@contextmanager
def chain_services(
    root: Path, data_dir: Path, environ: Mapping[str, str]
) -> Iterator[ChainServices]:
    """The coordinator's API on ``data_dir`` and both members (their data under ``root``),
    the members registered; everything started is stopped on the way out."""
    token = secrets.token_urlsafe(32)
    env = {**environ, "FEDERATION_DATA_DIR": str(data_dir), "FEDERATION_OPERATOR_TOKEN": token}
    members = member_environment(environ)
    with ExitStack() as stack:
        serve = [sys.executable, "-m", "coordinator", "serve", "coordinator", "--port", "0"]
        [url] = stack.enter_context(started((serve, env)))
        trust = f"{issuer_id()}={url}/.well-known/jwks.json"
        exchange = ("--exchange-url", f"{url}/token-exchange", "--terms-agent", TERMS)
        guarded = guard_available()
        first = (
            (example_command("terms_agent.py"), members)
            if guarded
            else (member_command("terms_member.py", root / TERMS, trust), members)
        )
        terms, privacy = stack.enter_context(
            started(
                first,
                (member_command("chain_member.py", root / PRIVACY, trust, *exchange), members),
            )
        )
        if guarded:  # the guard, once the agent it reads its card from is up
            guard = (guard_command(terms, root / TERMS, trust), guard_environment(members))
            [terms] = stack.enter_context(started(guard))
        headers = {"Authorization": f"Bearer {token}"}
        client = stack.enter_context(
            httpx.Client(timeout=60, headers=headers, verify=tls.verified(True))
        )
        services = ChainServices(url, client, {**env, "FEDERATION_SERVER": url}, guarded)
        services.register(TERMS, terms)
        services.register(PRIVACY, privacy)
        yield services


def guard_environment(members: Mapping[str, str]) -> dict[str, str]:
    """The guard's environment: the members', the legal team's audit token its own."""
    audit = members.get(TERMS_AUDIT_TOKEN)
    return {**members, GUARD_AUDIT_TOKEN: audit} if audit else dict(members)


@dataclass(frozen=True)
class ChainResult:
    """What the chain case shows: the run, its hops, the budgets and the proof."""

    run_id: str
    local_state: str
    parent: dict[str, Any]  # A's budget, as the coordinator reserved it for A's handoff
    hops: list[dict[str, Any]]
    verified: bool
    case: str = CASE
    guarded: bool = False  # the legal team (B) is a stock a2a-sdk agent behind the guard

    @property
    def left(self) -> dict[str, Any]:
        """What A has left after the children carved from its budget."""
        return carved(self.parent, [hop["budget"] for hop in self.hops if hop["granted"]])

    @property
    def nested(self) -> bool:
        """Every child within its parent, their sum too (nothing negative left)."""
        granted = [hop for hop in self.hops if hop["granted"]]
        return bool(granted) and all(v is None or v >= 0 for v in self.left.values())

    @property
    def as_expected(self) -> bool:
        return self.local_state == "ACCEPTED" and self.nested and self.verified

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "run_id": self.run_id,
            "local_state": self.local_state,
            "parent_budget": self.parent,
            "hops": self.hops,
            "left_to_parent": self.left,
            "nested": self.nested,
            "proof_bundle_verifies": self.verified,
            "legal_terms_behind_guard": self.guarded,
            "as_expected": self.as_expected,
        }


def carved(parent: Mapping[str, Any], children: list[Mapping[str, Any]]) -> dict[str, Any]:
    """``parent`` less every child's budget, per dimension (None: no limit)."""
    left: dict[str, Any] = {}
    for name in BUDGET_FIELDS:
        value = parent.get(name)
        spent: list[int] = [c[name] for c in children if c.get(name) is not None]
        left[name] = None if value is None else value - sum(spent)
    return left


def chain_result(services: ChainServices) -> ChainResult:
    """Delegate to A (which asks B) and read the outcome back from the coordinator."""
    document = services.delegate()
    run_id = document["run_id"]
    run = services.get(f"/v1/runs/{run_id}")
    hops = list(run.get("chain") or [])
    return ChainResult(
        run_id=run_id,
        local_state=document["local_state"],
        parent=_reserved(run, hops),
        hops=hops,
        verified=services.verifies(run_id),
        guarded=services.guarded,
    )


def _reserved(run: Mapping[str, Any], hops: list[dict[str, Any]]) -> dict[str, Any]:
    """The budget reserved for the first hop's handoff: the budget A's token carries."""
    parents = {hop.get("parent_handoff_id") for hop in hops}
    for row in (run.get("budget") or {}).get("ledger") or []:
        if row.get("kind") == "reserved" and str(row.get("branch", "")).split("/")[0] in parents:
            return {name: row.get(name) for name in BUDGET_FIELDS}
    raise ChainCaseError(f"run {run.get('run_id')}: no reservation for the chain's first hop")


def run_chain_case(data_dir: Path, environ: Mapping[str, str] | None = None) -> ChainResult:
    """The chain case on the demo's data directory (the members' data in ``demo/``)."""
    env = dict(os.environ if environ is None else environ)
    with chain_services(data_dir / "demo", data_dir, env) as services:
        return chain_result(services)
