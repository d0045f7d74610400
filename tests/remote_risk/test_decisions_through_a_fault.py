"""A send while a member's database cannot be written: a 503 worth retrying, and its
decisions logged once the database is back.

The decision log is what the coordinator reconciles against: a decision taken during a
storage fault (the database read-only, made as in :mod:`tests.faults`) must not be lost
with the write that failed. The send is refused as what failed: remote_risk's one
transaction (task, claim, receipt) as ``storage_unavailable``, the governed agent's claim
as ``replay_guard_unavailable``; both 503 with ``Retry-After``, so the coordinator sends
again. Served in-process on loopback: remote_risk, and the stock a2a-sdk agent governed
by the kit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import database_files, database_path, immutable_flag_works, read_only
from tests.members import RISK, SDK, MemberUnderTest
from tests.remote_risk.delegated import delegated_service, refusal_reason
from tests.remote_risk.test_stranger_refusals import decisions_after, log_size

EXPECTED = {
    RISK.name: ("storage_unavailable", [(True, "allowed", "h-1")]),
    SDK.name: (
        "replay_guard_unavailable",
        [(True, "allowed", "h-1"), (False, "replay_guard_unavailable", None)],
    ),
}


@pytest.mark.parametrize("member", [RISK, SDK], ids=lambda member: member.name)
def test_a_send_while_the_database_cannot_be_written_is_a_503_and_its_decisions_are_kept(
    tmp_path: Path, member: MemberUnderTest
) -> None:
    if not immutable_flag_works(tmp_path):
        pytest.skip("this filesystem has no immutable flag (chattr +i)")
    with delegated_service(member=member, data_dir=tmp_path) as (caller, app):
        caller.task_of(caller.send("run-1", "h-0"))
        app.state.audit_log.flush()
        size = log_size(app)
        files = database_files(database_path(app))
        read_only(files, True)
        try:
            refused = caller.send("run-1", "h-1")
            app.state.audit_log.flush()  # the refusal's entry tried, and failed
        finally:
            read_only(files, False)
        reason, during = EXPECTED[member.name]
        assert refusal_reason(refused) == (503, reason)
        assert refused.headers["Retry-After"] == "2"
        assert caller.send("run-1", "h-2").status_code == 200
        decided = [
            (d["allowed"], d["reason"], d.get("handoff_id")) for d in decisions_after(app, size)
        ]
    # each once; in the order the log could take them (a decision written along a claim
    # that rolled back waits again beside those written alone)
    assert sorted(decided, key=repr) == sorted([*during, (True, "allowed", "h-2")], key=repr)
