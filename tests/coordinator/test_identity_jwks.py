"""The published key set (jwks.json) is written when the keys change, not on every use."""

from __future__ import annotations

from pathlib import Path

from contracts import strict_json
from coordinator.authority.identity import JWKS_FILE, coordinator_keys, rotate
from coordinator.storage.datadir import DataDir


def test_jwks_json_is_rewritten_only_when_the_keys_change(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    published = data.path(JWKS_FILE)
    first = published.stat()
    for _ in range(3):  # every delegation loads the keys
        assert coordinator_keys(data).active.kid == keys.active.kid
    again = published.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    rotated = rotate(data, grace_seconds=60)
    assert published.stat().st_ino != first.st_ino
    kids = [key["kid"] for key in strict_json.loads(published.read_bytes())["keys"]]
    assert rotated.active.kid in kids and keys.active.kid in kids


def test_a_damaged_jwks_json_is_written_again(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    data.path(JWKS_FILE).write_text("{}")
    coordinator_keys(data)
    assert strict_json.loads(data.path(JWKS_FILE).read_bytes()) == keys.public_jwks()
