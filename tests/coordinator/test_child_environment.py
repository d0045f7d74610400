"""Services that demo and evaluate start get an allow-listed environment, never ours."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coordinator.assessment.demo import child_environment, remote_risk_process

SECRET = "coordinator-model-key-must-not-travel"


def test_only_the_allow_list_and_the_risk_settings_pass() -> None:
    """PATH and REMOTE_RISK_* pass; FEDERATION_* (the coordinator's key) does not."""
    ours = {
        "PATH": "/usr/bin",
        "FEDERATION_MODEL_API_KEY": SECRET,
        "FEDERATION_DATA_DIR": "/somewhere",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "REMOTE_RISK_TRUST_ISSUERS": "issuer=file",
        "REMOTE_RISK_MODEL_API_KEY": "risk-key",
    }
    assert child_environment(True, ours) == {
        "PATH": "/usr/bin",
        "REMOTE_RISK_TRUST_ISSUERS": "issuer=file",
        "REMOTE_RISK_MODEL_API_KEY": "risk-key",
    }
    assert "REMOTE_RISK_MODEL_API_KEY" not in child_environment(False, ours)


def _children_environments() -> list[bytes]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == os.getpid():
                found.append((stat.parent / "environ").read_bytes())
        except (OSError, IndexError, ValueError):
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_started_remote_risk_does_not_hold_the_coordinator_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The child's /proc/PID/environ holds no FEDERATION_* value of ours."""
    monkeypatch.setenv("FEDERATION_MODEL_API_KEY", SECRET)
    with remote_risk_process(["--insecure-anonymous", "--data-dir", str(tmp_path)]):
        environments = _children_environments()
    assert environments, "the started service was not found among our children"
    assert all(SECRET.encode() not in environ for environ in environments)
