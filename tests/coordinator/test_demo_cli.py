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
    """`demo --json --case all` emits one document with the five expected statuses."""
    completed = federation(tmp_path, "demo", "--json", "--case", "all")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    statuses = {case["case"]: case["assessment"]["status"] for case in document["cases"]}
    assert statuses == EXPECTED
    handoff_case = next(case for case in document["cases"] if case["case"] == "handoff")
    assert handoff_case["owner"] == "privacy"
    assert handoff_case["former_owner_rejected"] is True
    for case in document["cases"]:
        for handoff in case["handoffs"]:
            assert set(handoff) >= {
                "handoff_id",
                "target",
                "remote_task_id",
                "remote_state",
                "local_state",
            }
    listed = federation(tmp_path, "runs", "--json")
    assert len(json.loads(listed.stdout)["runs"]) == 5


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
