"""``python examples/chain_demo.py``, the delegation chain's demo, runs as documented: three
services as processes (the legal team's a stock agent behind the guard), the hop printed
by ``run show`` and ``audit show``, and the run's proof bundle verifying."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "examples" / "chain_demo.py"


def test_the_chain_demo_shows_the_hop_in_every_view() -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    done = subprocess.run(
        [sys.executable, str(DEMO)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("delegation chain (token exchanges):") == 2, done.stdout
    assert "legal-terms" in done.stdout and "ACCEPTED" in done.stdout
    # the legal team is an unmodified a2a-sdk agent behind the kit's guard (the sdk extra
    # is part of the test environment)
    assert "the legal team: a stock a2a-sdk agent behind the guard" in done.stdout
    assert "verifies" in done.stdout.splitlines()[-1]
