"""A delegation chain across three services, end to end: ``python examples/chain_demo.py``.

It starts, each as its own process on loopback with its own temporary data directory,
the coordinator's API (``federation serve coordinator``), the legal team's member and
the privacy team's (examples/chain_member.py), both built with the member kit: the legal
team's is the kit's guard (``federation serve guard``) in front of an unmodified a2a-sdk
agent (examples/terms_agent.py; without the a2a-sdk installed, the same skill built on
the kit, examples/terms_member.py). It registers both members, then delegates to the privacy team,
whose skill asks the legal team with a child of its own token: the coordinator mints it
by token exchange, narrowed and with its budget carved from the privacy team's. Then it
prints what the operator sees: ``federation run show`` and ``federation audit show`` of
the run (each with the chain's hop) and whether the run's proof bundle verifies.

Run it from the repository's root with the project's Python; it stops everything it
started, whatever happens. The services are those of ``federation demo --case chain``
(coordinator/assessment/chain_case.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from coordinator.assessment.chain_case import chain_result, chain_services


def federation(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    return done.stdout + done.stderr


def main() -> int:
    base = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    with tempfile.TemporaryDirectory(prefix="chain-demo-") as tmp:
        root = Path(tmp)
        with chain_services(root, root / "data", base) as services:
            result = chain_result(services)
            print(federation(services.env, "run", "show", result.run_id))
            print(federation(services.env, "audit", "show", result.run_id))
        behind = "a stock a2a-sdk agent behind the guard" if result.guarded else "a kit member"
        print(f"the legal team: {behind}")
        verdict = "verifies" if result.verified else "does NOT verify"
        print(f"proof bundle of {result.run_id}: {verdict}")
        return 0 if result.local_state == "ACCEPTED" and result.verified else 1


if __name__ == "__main__":
    sys.exit(main())
