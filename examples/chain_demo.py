"""A delegation chain across three services, end to end: ``python examples/chain_demo.py``.

It starts, each as its own process on loopback with its own temporary data directory,
the coordinator's API (``federation serve coordinator``), the legal team's member
(examples/terms_member.py) and the privacy team's (examples/chain_member.py), both built
with the member kit. It registers both members, then delegates to the privacy team,
whose skill asks the legal team with a child of its own token: the coordinator mints it
by token exchange, narrowed and with its budget carved from the privacy team's. Then it
prints what the operator sees: ``federation run show`` and ``federation audit show`` of
the run (each with the chain's hop) and whether the run's proof bundle verifies.

Run it from the repository's root with the project's Python; it stops everything it
started, whatever happens.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

EXAMPLES = Path(__file__).resolve().parent
ISSUER = "urn:a2a-federation:coordinator"
PRIVACY, TERMS = "privacy-review", "legal-terms"
INPUT = {"text": "Refunds are handled by the support team.", "terms": ["refund", "warranty"]}


@contextmanager
def started(command: list[str], env: dict[str, str]) -> Iterator[str]:
    """The process of ``command``; yields the URL its first line says it listens on."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        if " listening on http" not in first:
            raise SystemExit(f"{command[1]} did not start: {first!r}")
        yield first.rpartition(" ")[2]
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def member(script: str, data_dir: Path, trust: str, *extra: str) -> list[str]:
    """The command of one of the examples' members on a free port."""
    return [
        *(sys.executable, str(EXAMPLES / script), "--port", "0"),
        *("--data-dir", str(data_dir), "--trust-issuer", trust, *extra),
    ]


def federation(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    return done.stdout + done.stderr


def post(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.post(url, json=body)
    if answer.status_code != 200:
        raise SystemExit(f"{url}: {answer.status_code} {answer.text}")
    document: dict[str, Any] = answer.json()
    return document


def main() -> int:
    token = secrets.token_urlsafe(32)
    base = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    with tempfile.TemporaryDirectory(prefix="chain-demo-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        env = {
            **base,
            "FEDERATION_DATA_DIR": str(root / "data"),
            "FEDERATION_OPERATOR_TOKEN": token,
        }
        serve = [sys.executable, "-m", "coordinator", "serve", "coordinator", "--port", "0"]
        url = stack.enter_context(started(serve, env))
        trust = f"{ISSUER}={url}/.well-known/jwks.json"
        terms_command = member("terms_member.py", root / "terms", trust)
        terms = stack.enter_context(started(terms_command, base))
        exchange = ("--exchange-url", f"{url}/token-exchange", "--terms-agent", TERMS)
        privacy_command = member("chain_member.py", root / "privacy", trust, *exchange)
        privacy = stack.enter_context(started(privacy_command, base))
        client = stack.enter_context(
            httpx.Client(timeout=60, headers={"Authorization": f"Bearer {token}"})
        )
        for name, address, skill in (
            (TERMS, terms, "check-terms"),
            (PRIVACY, privacy, "review-privacy"),
        ):
            post(client, f"{url}/v1/agents", {
                "url": address, "name": name, "trust_on_first_use": True,
                "return_schemas": {skill: {"type": "object"}},
            })  # fmt: skip
        body = {"to": PRIVACY, "skill": "review-privacy", "input": INPUT, "timeout": 60}
        document = post(client, f"{url}/v1/delegations", body)
        run_id = document["run_id"]
        cli = {**env, "FEDERATION_SERVER": url}
        print(federation(cli, "run", "show", run_id))
        print(federation(cli, "audit", "show", run_id))
        bundle = client.post(f"{url}/v1/audit/runs/{run_id}/prove").json()
        verdict = post(client, f"{url}/v1/audit/verify", {"bundle": bundle})
        print(f"proof bundle of {run_id}: {'verifies' if verdict['ok'] else verdict}")
        return 0 if document["local_state"] == "ACCEPTED" and verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
