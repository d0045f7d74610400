"""The claim's commit is lost on the way back: the send is not refused as a replay.

The stock a2a-sdk agent governed in-process by the kit (as in
tests/guard/test_send_writes.py), its database PostgreSQL reached through a link that
loses the answer to one COMMIT (tests/commit_cut.py): the COMMIT of the write that claims
a send's token before the agent is asked. The server committed the claim; the kit saw its
connection lost, and made the claim again alone, which found the token's ``jti`` taken.
That is not a replay anyone can tell: it may be this very claim. So the send is refused
503 ``replay_guard_unavailable`` with ``Retry-After`` (the caller's next attempt, with a
token of its own, is served) and the decision log says so, never ``replayed_jti``.
(Before, the send was refused 401 ``replayed_jti``: a replay alarm for a network fault,
and a refusal the coordinator takes as final.)
"""

from __future__ import annotations

from tests.commit_cut import CommitCut, cut_link
from tests.coordinator.conftest import postgres_server, postgres_url
from tests.members import SDK
from tests.remote_risk.delegated import delegated_service, refusal_reason
from tests.remote_risk.test_stranger_refusals import decisions_after, log_size

__all__ = ["cut_link", "postgres_server", "postgres_url"]


def test_a_claim_whose_commit_answer_is_lost_is_unavailable_not_a_replay(
    cut_link: tuple[str, CommitCut],
) -> None:
    url, cut = cut_link
    with delegated_service(member=SDK, database_url=url) as (caller, app):
        caller.task_of(caller.send("run-1", "h-0"))  # warm: keys, connections, entries
        app.state.audit_log.flush()
        before = log_size(app)
        cut.arm(b"remote_risk_used_tokens")
        refused = caller.send("run-1", "h-1")
        assert cut.cuts == 1
        assert refusal_reason(refused) == (503, "replay_guard_unavailable"), refused.text
        assert refused.headers["Retry-After"] == "2"
        retried = caller.task_of(caller.send("run-1", "h-1", attempt=2))
        assert retried["status"]["state"] == "TASK_STATE_COMPLETED"
        app.state.audit_log.flush()
        decided = decisions_after(app, before)
    reasons = [decision.get("reason") for decision in decided]
    assert "replayed_jti" not in reasons, decided
    assert "replay_guard_unavailable" in reasons, decided
