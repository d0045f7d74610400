"""The coordinator's own commit lands, but its answer is lost: a typed error, then recovery.

Real processes: ``federation delegate`` with its database on PostgreSQL, reached through
a link that loses the answer to one COMMIT (tests/commit_cut.py), and a registered
remote_risk. The COMMIT cut is the handoff's first durable point (its intent: admitted,
minted, dispatched), which PostgreSQL committed. The process cannot know that it did, so
it sends nothing and says so as the storage fault it is: one line,
``storage_unavailable``, exit 3 (before: ``internal_error`` and the driver's text over two
lines, exit 70). What it left is what a crash there leaves: the handoff in flight, which
``federation recover`` takes to ACCEPTED with exactly one remote task, and a ledger that
verifies.
"""

from __future__ import annotations

import json
from pathlib import Path

from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from member_kit.storage.engine import DATABASE_FILE
from tests.commit_cut import CommitCut, cut_link
from tests.coordinator.conftest import postgres_server, postgres_url
from tests.processes import PAYLOAD, federation, registered
from tests.remote_risk.test_resume import TaskRows

__all__ = ["cut_link", "postgres_server", "postgres_url"]


def run(data: DataDir, url: str, *args: str) -> tuple[int, str, str]:
    process = federation(data.root, *args, FEDERATION_DATABASE_URL=url)
    out, err = process.communicate(timeout=90)
    return process.returncode, out, err


def test_a_lost_answer_to_the_intent_s_commit_is_a_storage_fault_then_recovered(
    tmp_path: Path, cut_link: tuple[str, CommitCut], postgres_url: str
) -> None:
    url, cut = cut_link
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    delegate = (
        *("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy"),
        *("--input", str(input_file), "--timeout", "30", "--json"),
    )
    with registered(tmp_path) as (data, _remote):
        code, _, err = run(data, url, *delegate)  # the schema made, the link warm
        assert code == 0, err
        cut.arm(b"INSERT INTO audit_events")
        code, out, err = run(data, url, *delegate)
        assert cut.cuts == 1
        errors = [line for line in err.splitlines() if line.startswith("federation: error:")]
        assert code == 3, err
        assert errors == [err.strip().splitlines()[-1]], err  # one line, the last
        assert errors[0].startswith("federation: error: storage_unavailable: "), err
        assert "Traceback" not in err and out == ""

        ws = Workspace(data, postgres_url)
        [in_flight] = ws.run_store().in_flight()
        code, out, err = run(data, url, "recover")
        assert code == 0 and "ACCEPTED" in out, err
        stored = ws.run_store().handoff(in_flight)
        assert stored is not None and stored[0].state.value == "ACCEPTED"
        ws.close()
        tasks = TaskRows(f"sqlite+pysqlite:///{tmp_path / 'remote' / DATABASE_FILE}").states()
        assert len(tasks) == 2  # the first delegate's and this one's, no more
        code, out, _ = run(data, url, "audit", "verify")
        assert code == 0 and out.startswith("ledger: ok")
