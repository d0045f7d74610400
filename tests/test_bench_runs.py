"""The benchmarks still drive the services as deployed: one short window of figure (1)
against a real remote_risk process, with every request answered.

Not a timing: the figures themselves are ``make bench``'s. This holds only that the
load the bench sends is still accepted, since a change to what a service requires (a
token's audience, say) otherwise surfaces as a bench that stops at its first figure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import (
    chain_revocation,
    coordinator_cpu,
    member_overhead,
    procs,
    remote_cpu,
    remote_side,
    send_profile,
    services,
)
from bench.__main__ import Timing
from coordinator.authority.revocation import STATUS_URL_ENV


def test_figure_one_drives_remote_risk_without_a_failed_request(tmp_path: Path) -> None:
    issuer = services.Issuer.create(tmp_path)
    result = remote_side.drive(tmp_path, issuer, "risk", 2, Timing(0.5, 1, 0.2))
    [window] = result["runs"]
    assert window["errors"] == 0, window["first_error"]
    assert window["rps"] > 0
    assert window["server_cpu_ms"] > 0  # the server's own CPU per request, read from /proc


def test_the_floors_of_figures_one_and_two_answer_every_request(tmp_path: Path) -> None:
    """The member floor under the load generator (1f), and the governed floor against it
    (2f), as make bench drives them: every request answered, both processes' CPU read."""
    issuer = services.Issuer.create(tmp_path)
    [window] = remote_side.drive(tmp_path, issuer, "floor", 2, Timing(0.5, 1, 0.2))["runs"]
    assert window["errors"] == 0 and window["server_cpu_ms"] > 0, window["first_error"]
    with services.floor(tmp_path, issuer) as floor:
        found = procs.run_load(
            "bench.handoffs",
            *("floor", floor.url, "--keys", str(issuer.keys_dir), "--concurrency", "2"),
            *("--seconds", "0.5", "--runs", "1", "--warmup", "0.2"),
            *("--server-pid", str(floor.process.pid)),
        )
    [window] = found["runs"]
    assert window["errors"] == 0 and window["count"] > 0, window
    assert window["cpu_ms"] > 0 and window["server_cpu_ms"] > 0, window


def test_the_coordinator_a_b_drives_governed_handoffs_from_each_checkout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One short window per checkout (this one, and this one again as the other side of
    the A/B) and of the floors: every handoff ACCEPTED, both processes' CPU read, and the
    coordinator's context switches, points a commit and commits made in place."""
    coordinator_cpu.main(
        ["--rounds", "1", "--seconds", "0.5", "--warmup", "0.3", "--also", "again=.", "--floor"]
    )
    found = json.loads(capsys.readouterr().out)
    assert set(found["windows"]) == {coordinator_cpu.OURS, "again", coordinator_cpu.FLOOR}
    for [window] in found["windows"].values():
        assert window["failed"] == 0 and window["handoffs_per_s"] > 0, window
        assert window["coordinator_cpu_ms"] > 0 and window["remote_cpu_ms"] > 0, window
        assert window["voluntary_switches"] >= 0 and window["involuntary_switches"] >= 0
    for checkout in (coordinator_cpu.OURS, "again"):  # what its writer grouped
        [window] = found["windows"][checkout]
        assert window["points_per_commit"] >= 1, window
        assert window["commits_in_place"] >= 1, window  # SQLite, one at a time: on the loop


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


def test_the_chain_revocation_bench_cancels_every_hop(monkeypatch: pytest.MonkeyPatch) -> None:
    """One round of each mode: owner -> A -> B -> C, all WORKING, the run revoked; every
    hop's task ends CANCELED, pushed to each hop's agent or (links cut) from the status
    list (the bench raises otherwise)."""
    monkeypatch.setenv(STATUS_URL_ENV, "")  # the bench names its own; restored after
    result = chain_revocation.measure(rounds=1, poll=0.5)
    for mode in ("push", "lost"):
        assert set(result[mode]) == {"every_hop", *chain_revocation.HOPS}
        assert result[mode]["every_hop"]["max_s"] >= result[mode]["hop-a"]["max_s"]


def test_the_send_profile_reads_both_members_from_their_running_servers(tmp_path: Path) -> None:
    """bench.send_profile on a few sends: each figure read from the servers themselves
    (their CPU from /proc, their calls from the profile each wrote, their write-ahead
    logs), for remote_risk and the floor, with the a2a-sdk server's CPU beside them."""
    found = send_profile.measure(tmp_path, requests=100, warmup=5)
    assert set(found["cpu_ms"]) == {"remote_risk", "floor", "a2a-sdk"}
    # /proc counts in clock ticks (10 ms): 100 sends are several ticks even for the floor
    assert all(sum(split.values()) > 0 for split in found["cpu_ms"].values()), found
    for name in ("remote_risk", "floor"):
        per_send = found["per_send"][name]
        assert per_send["python_calls"] > 100 and per_send["sql_statements"] >= 2, found
        assert found["pages_per_commit"][name] >= 1, found


def test_the_member_a_b_under_load_reads_each_server_from_its_own_checkout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``bench.remote_cpu --concurrency``: windows under the load generator, remote_risk of
    this checkout and of another (this one again) beside the a2a-sdk server, every send
    answered (a failed one raises) and each process's CPU read."""
    remote_cpu.main(
        ["--concurrency", "2", "--seconds", "0.5", "--rounds", "1", "--also", "again=."]
    )
    found = json.loads(capsys.readouterr().out)
    assert set(found["runs"]) == {remote_cpu.SDK, remote_cpu.OURS, "again"}
    for [cpu_ms] in found["runs"].values():
        assert cpu_ms > 0
