"""bench.handoff_instructions: the requests it counts are real, successful ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import handoff_instructions, procs, services
from coordinator import loop


@pytest.mark.parametrize(
    ("serving", "driving"),
    [
        (services.remote_risk, handoff_instructions.drive_coordinator),
        (services.floor, handoff_instructions.drive_floor),
    ],
    ids=["coordinator-to-remote_risk", "governed-floor-to-member-floor"],
)
def test_every_counted_handoff_is_accepted_by_the_real_member(
    tmp_path: Path, serving: Any, driving: Any
) -> None:
    issuer = services.Issuer.create(tmp_path)
    with serving(tmp_path, issuer) as member:
        made = loop.run(driving(member.url, str(issuer.keys_dir), 1, 2))

    assert made == 3


def test_a_handoff_the_remote_refuses_fails_the_run(tmp_path: Path) -> None:
    issuer = services.Issuer.create(tmp_path)
    stranger = services.Issuer.create(tmp_path / "stranger")  # keys remote_risk does not trust
    with services.remote_risk(tmp_path, issuer) as remote:
        keys = str(stranger.keys_dir)
        with pytest.raises(RuntimeError, match="handoff 0 ended"):
            loop.run(handoff_instructions.drive_coordinator(remote.url, keys, 0, 1))


def test_every_counted_round_trip_of_the_a2a_sdk_client_completes(tmp_path: Path) -> None:
    port = procs.free_port()
    command = procs.python("bench.baselines", "sdk", "--port", str(port))
    with procs.server(command, port, log=tmp_path / "sdk.log"):
        url = f"http://{procs.HOST}:{port}"
        made = loop.run(handoff_instructions.drive_sdk_client(url, 1, 2))

    assert made == 3


def test_no_head_is_signed_while_counting_and_the_last_covers_every_event(
    tmp_path: Path,
) -> None:
    from agent_cards.keys import load_key_set
    from bench import governed
    from coordinator.audit.log.chain import Ledger
    from coordinator.audit.log.current_head import current_head
    from coordinator.audit.log.events import AuditEvent
    from coordinator.authority.delegator import DEFAULT_ISSUER

    keys = load_key_set(services.Issuer.create(tmp_path).keys_dir)
    ws = governed.workspace(tmp_path / "ws")
    ledger, key = Ledger(ws.engine()), keys.signing_key().private_key
    head = current_head(ws.engine())
    head.min_interval = 0.0

    def grow(count: int) -> None:
        ledger.append_many([AuditEvent(event_type="bench.test", actor="t") for _ in range(count)])

    grow(3)
    assert head.latest(key, DEFAULT_ISSUER).tree_size == 3
    handoff_instructions._head_held_after_warm_up(ws, 5, 5)
    grow(4)
    assert head.latest(key, DEFAULT_ISSUER).tree_size == 3  # held: the range is not read
    handoff_instructions._sign_last_head(ws, keys)
    assert head.latest(key, DEFAULT_ISSUER).tree_size == 7
    ws.close()


def test_a_floor_handoff_the_member_floor_refuses_fails_the_run(tmp_path: Path) -> None:
    issuer = services.Issuer.create(tmp_path)
    stranger = services.Issuer.create(tmp_path / "stranger")
    with services.floor(tmp_path, issuer) as floor:
        keys = str(stranger.keys_dir)
        with pytest.raises(RuntimeError, match="floor handoff 0 refused"):
            loop.run(handoff_instructions.drive_floor(floor.url, keys, 0, 1))
