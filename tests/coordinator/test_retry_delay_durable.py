"""A retry's delay outlives the process that scheduled it.

A retry is admitted at its failed predecessor's outcome point, with its delay in the
ledger (``handoff.retry_scheduled``). Real processes: remote_risk stopped, so every send of
``federation delegate`` meets a closed port and is retried with a growing backoff; the
delegation is killed (SIGKILL) at the start of a delay of at least two seconds, remote_risk
is started again, and ``federation recover`` drives the admitted retry. The retry must not
be sent before its delay has run out: a coordinator restarted in a loop would otherwise
turn the backoff into a burst against a remote that is struggling to come back.
"""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

from coordinator.audit.ledger import Ledger
from coordinator.audit.log.events import StoredEvent
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.processes import PAYLOAD, federation, registered, wait_for

LONG_ENOUGH = 2.0  # seconds: more than a recovery process takes to start


def test_recovery_waits_out_the_delay_of_a_retry_left_by_a_killed_process(
    tmp_path: Path,
) -> None:
    with registered(tmp_path) as (data, remote):
        remote.stop()
        delegating, run_id = _killed_in_a_long_delay(tmp_path, data)
        remote.start()
        recovered = federation(data.root, "recover")
        out, err = recovered.communicate(timeout=90)
        assert recovered.returncode == 0, err
        assert "ACCEPTED" in out, out
    events = _events(data, run_id)
    [scheduled] = [
        e
        for e in events
        if e.event_type == "handoff.retry_scheduled" and e.data["delay_seconds"] >= LONG_ENOUGH
    ]
    due = scheduled.recorded_at + timedelta(seconds=scheduled.data["delay_seconds"])
    retry = (scheduled.attempt or 0) + 1
    sent = [e for e in events if e.event_type == "message.dispatched" and e.attempt == retry]
    assert sent, f"attempt {retry} was never sent: {[e.event_type for e in events]}"
    assert sent[0].recorded_at >= due, (
        f"attempt {retry} sent at {sent[0].recorded_at}, before its delay ran out at {due}"
    )
    assert delegating.returncode == -signal.SIGKILL


def _killed_in_a_long_delay(tmp_path: Path, data: DataDir) -> tuple[subprocess.Popen[str], str]:
    """``federation delegate`` against the stopped remote, let through each short retry
    delay and killed at the start of the first one of at least LONG_ENOUGH seconds."""
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    marker = tmp_path / "paused"
    delegating = federation(
        data.root,
        *("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy"),
        *("--input", str(input_file), "--timeout", "60", "--json"),
        FEDERATION_PAUSE_AT="retry_delay",
        FEDERATION_PAUSE_MARKER=str(marker),
    )
    while True:
        wait_for(lambda: marker.exists() or delegating.poll() is not None, 60, "a retry delay")
        assert delegating.poll() is None, delegating.communicate()
        scheduled = _last_scheduled(data)
        if scheduled.data["delay_seconds"] >= LONG_ENOUGH:
            delegating.send_signal(signal.SIGKILL)
            delegating.wait(timeout=10)
            assert scheduled.run_id is not None
            return delegating, scheduled.run_id
        marker.unlink()  # a short delay: let it go on to the next attempt
        wait_for(lambda: not marker.exists(), 10, "the pause to end")


def _last_scheduled(data: DataDir) -> StoredEvent:
    with_retries = [e for e in _events(data, None) if e.event_type == "handoff.retry_scheduled"]
    assert with_retries, "paused in a retry delay with no retry scheduled"
    return with_retries[-1]


def _events(data: DataDir, run_id: str | None) -> list[StoredEvent]:
    ws = Workspace(data)
    try:
        return Ledger(ws.engine()).events(run_id)
    finally:
        ws.close()
