"""A ledger edited behind the coordinator's back is vouched for by no token.

Each token shows the ledger's latest signed tree head, brought up to date off the event
loop before the token is minted; an event whose stored bytes no longer match its hash
stops the signing, and the handoff fails at its grant (``ledger_broken``) rather than
going out under a head that vouches for the edit. Driven as ``federation delegate`` does,
against a real remote_risk.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from agent_cards.keys import load_key_set
from bench import governed, services
from contracts.handoff import HandoffState
from coordinator import loop
from coordinator.audit.log.current_head import current_head
from coordinator.remote.wire.client import A2AClient


def test_a_handoff_after_an_event_was_edited_fails_at_its_grant(tmp_path: Path) -> None:
    issuer = services.Issuer.create(tmp_path)
    keys = load_key_set(issuer.keys_dir)
    ws = governed.workspace(tmp_path / "ws")
    current_head(ws.engine()).min_interval = 0.0  # every token reads the new events

    async def two_handoffs(url: str) -> tuple[HandoffState, HandoffState, str | None]:
        async with A2AClient() as client:
            agent = await governed.register(client, ws, url, "remote-risk")
            first = await governed.handoff(client, agent, keys, ws)
            with ws.engine().begin() as connection:  # an edit straight into the table
                connection.execute(
                    text(
                        "UPDATE audit_events SET canonical = replace(canonical,"
                        " 'coordinator', 'c0ordinator')"
                        " WHERE seq = (SELECT max(seq) FROM audit_events)"
                    )
                )
            second = await governed.handoff(client, agent, keys, ws)
        return first.record.state, second.record.state, second.record.reason

    with services.remote_risk(tmp_path, issuer) as remote:
        first, second, reason = loop.run(two_handoffs(remote.url))
    ws.close()

    assert first is HandoffState.ACCEPTED
    assert (second, reason) == (HandoffState.FAILED, "ledger_broken")
