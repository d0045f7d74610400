"""The remote's commit of a send lands, but its answer is lost: the handoff still ends well.

Real processes: remote_risk on PostgreSQL, reached through a link that loses the answer
to one COMMIT (tests/commit_cut.py), registered with a coordinator, and
``federation delegate``. The COMMIT cut is that of the send's one transaction (the
token's claim, the task, its receipt): PostgreSQL committed it, remote_risk saw its
connection lost and answered the send as a storage fault (503, ``Retry-After``). The
coordinator sends again under the same idempotency key; the task the first send opened
is the one answered. What must hold: the first attempt fails as the storage fault it
was, and the handoff ends ACCEPTED on the next, with exactly one remote task (the
receipt verified, as return admission requires).
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from tests.commit_cut import CommitCut, cut_link
from tests.coordinator.conftest import _libpq_conninfo, postgres_server, postgres_url
from tests.processes import PAYLOAD, federation, registered

__all__ = ["cut_link", "postgres_server", "postgres_url"]


def remote_tasks(postgres_url: str) -> list[str]:
    with psycopg.connect(_libpq_conninfo(postgres_url)) as connection:
        rows = connection.execute("SELECT state FROM remote_risk_tasks").fetchall()
    return [str(state) for (state,) in rows]


def test_a_send_whose_commit_answer_is_lost_ends_with_the_task_it_opened(
    tmp_path: Path, cut_link: tuple[str, CommitCut], postgres_url: str
) -> None:
    url, cut = cut_link
    with registered(tmp_path, database_url=url) as (data, _remote):
        input_file = tmp_path / "input.json"
        input_file.write_text(json.dumps(PAYLOAD))
        cut.arm(b"remote_risk_used_tokens")
        delegate = federation(
            data.root,
            *("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy"),
            *("--input", str(input_file), "--timeout", "30", "--json"),
        )
        out, err = delegate.communicate(timeout=90)
    assert cut.cuts == 1
    document = json.loads(out)
    assert document["local_state"] == "ACCEPTED", (document, err)
    first, *_ = document["branches"]
    assert first["reason"] == "dispatch_failed:InternalError:storage_unavailable", first
    assert len(remote_tasks(postgres_url)) == 1
