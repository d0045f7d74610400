"""`federation demo` starts remote_risk as its own process and reports every case."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from coordinator.assessment.scenario import EXPECTED_STATUS
from tests.scenarios import Scenario

EXPECTED = EXPECTED_STATUS


def federation(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FEDERATION_DATA_DIR": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_demo_json_reports_all_cases(tmp_path: Path) -> None:
    """`demo --json --case all` emits one document with the five expected statuses and
    the chain case, all six as expected."""
    completed = federation(tmp_path, "demo", "--json", "--case", "all")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    pilot = [case for case in document["cases"] if case["case"] != "chain"]
    statuses = {case["case"]: case["assessment"]["status"] for case in pilot}
    assert statuses == EXPECTED
    [chain] = [case for case in document["cases"] if case["case"] == "chain"]
    assert chain["as_expected"] is True and document["as_expected"] == 6
    handoff_case = next(case for case in document["cases"] if case["case"] == "handoff")
    assert handoff_case["owner"] == "privacy"
    assert handoff_case["former_owner_rejected"] is True
    for case in pilot:
        for handoff in case["handoffs"]:
            assert set(handoff) >= {
                "handoff_id",
                "target",
                "remote_task_id",
                "remote_state",
                "local_state",
            }
    listed = federation(tmp_path, "runs", "--json")
    assert len(json.loads(listed.stdout)["runs"]) == 6


def test_demo_text_trace_names_fields_states_and_owner(tmp_path: Path) -> None:
    """The readable trace says who received which fields, remote states and the owner."""
    completed = federation(tmp_path, "demo", "--case", "handoff")
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "received: brief, policy_note" in out
    assert "TASK_STATE_COMPLETED" in out
    assert "owner: privacy" in out and "rejected" in out


def test_demo_without_a_data_dir_keeps_out_of_the_users(throwaway_demo: Scenario) -> None:
    """Given no data directory, the demo works in a throwaway one it names, leaves the
    user's default directory untouched, and ends with how many cases came out as expected."""
    completed = throwaway_demo
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.rstrip().endswith("1/1 cases as expected")
    line = next(x for x in completed.stderr.splitlines() if x.startswith("demo data directory: "))
    throwaway = Path(line.split(": ", 1)[1].split(" ")[0])
    assert (throwaway / "federation.db").exists()
    assert not (completed.data.parent / "home").exists()


def test_the_chain_case_nests_budgets_and_its_bundle_verifies(tmp_path: Path) -> None:
    """`demo --case chain`: coordinator, the privacy team's member and the legal team's as
    three processes; the privacy member sub-delegates by token exchange, the child's budget
    carved exactly from its own; the run is in `runs` and its proof bundle verifies."""
    assert "chain" in federation(tmp_path, "demo", "--help").stdout
    completed = federation(tmp_path, "demo", "--json", "--case", "chain")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    [case] = json.loads(completed.stdout)["cases"]
    assert case["local_state"] == "ACCEPTED" and case["proof_bundle_verifies"] is True
    [hop] = case["hops"]
    assert hop["granted"] and hop["to"] == "legal-terms" and hop["depth"] == 2
    parent, child, left = case["parent_budget"], hop["budget"], case["left_to_parent"]
    for name, amount in parent.items():
        if amount is not None:
            assert child[name] + left[name] == amount and left[name] >= 0
    listed = json.loads(federation(tmp_path, "runs", "--json").stdout)["runs"]
    assert [run["run_id"] for run in listed] == [case["run_id"]]
    text = federation(tmp_path, "demo", "--case", "chain")
    assert text.returncode == 0, text.stdout + text.stderr
    assert "-> legal-terms (depth 2) by token exchange, granted" in text.stdout
    assert "budgets nest exactly" in text.stdout and "verifies" in text.stdout
    assert text.stdout.rstrip().endswith("1/1 cases as expected")
