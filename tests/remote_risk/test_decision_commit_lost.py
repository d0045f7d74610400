"""A decision's commit is lost on the way back: the decision log still holds it once.

remote_risk on PostgreSQL, reached through a link that loses the answer to one COMMIT
(tests/commit_cut.py): the COMMIT of the decision-log writer's own transaction, the one
that enters a send's ``allowed`` decision. PostgreSQL committed it; the writer saw its
connection lost, a storage fault, and kept the entry for the next write of the log. That
write must not enter it a second time: a log that says a token was allowed twice tells
an auditor of a replay that never happened.
"""

from __future__ import annotations

from tests.commit_cut import CommitCut, cut_link
from tests.coordinator.conftest import postgres_server, postgres_url
from tests.remote_risk.delegated import delegated_service
from tests.remote_risk.test_stranger_refusals import decisions_after, log_size

__all__ = ["cut_link", "postgres_server", "postgres_url"]


def test_a_decision_whose_commit_answer_is_lost_is_entered_once(
    cut_link: tuple[str, CommitCut],
) -> None:
    url, cut = cut_link
    with delegated_service(database_url=url) as (caller, app):
        caller.task_of(caller.send("run-1", "h-0"))  # warm: keys, connections, entries
        before = log_size(app)
        cut.arm(b'"kind":"decision"')  # only the decision-log writer's entries say so
        caller.task_of(caller.send("run-1", "h-1"))
        app.state.audit_log.flush()
        caller.task_of(caller.send("run-1", "h-2"))  # the log written again after it
        decided = decisions_after(app, before)
    assert cut.cuts == 1
    jtis = [decision["jti"] for decision in decided]
    assert len(jtis) == 2 and len(set(jtis)) == 2, decided
