"""The benchmarks still drive the services as deployed: one short window of figure (1)
against a real remote_risk process, with every request answered.

Not a timing: the figures themselves are ``make bench``'s. This holds only that the
load the bench sends is still accepted, since a change to what a service requires (a
token's audience, say) otherwise surfaces as a bench that stops at its first figure.
"""

from __future__ import annotations

from pathlib import Path

from bench import member_overhead, remote_side, services
from bench.__main__ import Timing


def test_figure_one_drives_remote_risk_without_a_failed_request(tmp_path: Path) -> None:
    issuer = services.Issuer.create(tmp_path)
    result = remote_side.drive(tmp_path, issuer, "risk", 2, Timing(0.5, 1, 0.2))
    [window] = result["runs"]
    assert window["errors"] == 0, window["first_error"]
    assert window["rps"] > 0


def test_figure_ten_drives_the_agent_the_kit_member_and_the_guard(tmp_path: Path) -> None:
    """Every send of figure (10) completes, on the bare agent, the kit member and the
    guard (a failed one raises), and the CPU of each is read."""
    found = member_overhead.measure(tmp_path, requests=5, rounds=1, warmup=2)
    assert {name: len(values) for name, values in found.items()} == {
        "agent": 1,
        "kit": 1,
        "guard": 1,
    }
    assert all(value >= 0 for values in found.values() for value in values)
