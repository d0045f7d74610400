"""Each member keeps its own database: a second member pointed at another's is refused.

Two members on the kit share nothing but code: pointed at the same database (the same
PostgreSQL schema, or the same SQLite file), they would share the kit's tables, so one
team's decision log would hold the other's entries and its audit routes would show them.
The first member to open a database marks it as its own; a process of another member
then refuses to start, with one line naming both, while a replica of the same member
(same name, same database) starts as before.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from contracts import strict_json
from tests import tokens
from tests.processes import RemoteRiskProcess

ROOT = Path(__file__).resolve().parents[2]
SDK_MEMBER = ROOT / "examples" / "sdk_member.py"  # a stock a2a-sdk agent, governed by the kit
TERMS = ROOT / "examples" / "terms_member.py"  # the legal team's member on the kit


def trusted_jwks(root: Path) -> Path:
    jwks = root / "coordinator.jwks.json"
    jwks.write_bytes(strict_json.dumps({"keys": [tokens.COORDINATOR_KEY.public_jwk()]}))
    return jwks


def member_process(script: Path, data_dir: Path, jwks: Path, *extra: str) -> subprocess.Popen[str]:
    """An example member as a process, trusting the test coordinator's key."""
    trust = ["--trust-issuer", f"coordinator={jwks}"]
    return subprocess.Popen(
        [sys.executable, str(script), "--port", "0", "--data-dir", str(data_dir), *trust, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def sdk_member(
    data_dir: Path, jwks: Path, database_url: str | None = None
) -> subprocess.Popen[str]:
    """The governed a2a-sdk agent, on ``database_url`` if given."""
    extra = ["--database-url", database_url] if database_url else []
    return member_process(SDK_MEMBER, data_dir, jwks, *extra)


def terms_member(data_dir: Path, jwks: Path) -> subprocess.Popen[str]:
    return member_process(TERMS, data_dir, jwks)


def started(process: subprocess.Popen[str]) -> None:
    """Wait for ``process``'s first line (it is listening), then stop it."""
    try:
        assert process.stdout is not None
        assert "listening on " in process.stdout.readline()
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_another_member_on_the_same_database_is_refused_at_start(
    database_url: str, tmp_path: Path
) -> None:
    jwks = trusted_jwks(tmp_path)
    risk = RemoteRiskProcess(tmp_path / "risk", jwks, database_url=database_url)
    risk.start()
    try:
        replica = RemoteRiskProcess(tmp_path / "risk", jwks, database_url=database_url)
        replica.start()  # the same member: a replica shares its database
        replica.stop()
        other = sdk_member(tmp_path / "other", jwks, database_url)
        out, err = other.communicate(timeout=60)
    finally:
        risk.stop()
    assert other.returncode == 2, (out, err)
    (line,) = err.strip().splitlines()
    assert line.startswith("sdk-member: error: database_of_another_member: ")
    assert "'remote_risk'" in line and "'sdk_member'" in line
    assert "listening" not in out


def test_a_member_on_a_database_of_its_own_starts(tmp_path: Path) -> None:
    """The same two members, each on its own SQLite file, both start."""
    jwks = trusted_jwks(tmp_path)
    risk = RemoteRiskProcess(tmp_path / "risk", jwks)
    risk.start()
    try:
        started(sdk_member(tmp_path / "other", jwks, f"sqlite:///{tmp_path / 'other.db'}"))
    finally:
        risk.stop()


def test_a_member_s_database_file_is_named_after_it(tmp_path: Path) -> None:
    """In its data directory a member's database is ``<its name>.db`` (remote_risk's is
    still ``remote-risk.db``), not remote_risk's file."""
    jwks = trusted_jwks(tmp_path)
    data_dir = tmp_path / "other"
    started(sdk_member(data_dir, jwks))
    assert (data_dir / "sdk-member.db").exists()
    assert not (data_dir / "remote-risk.db").exists()


def test_a_member_keeps_the_database_file_an_earlier_version_named(tmp_path: Path) -> None:
    """A member whose data directory holds the file every member used before (its own
    ``remote-risk.db``) goes on with that file: nothing it stored there is left behind."""
    jwks = trusted_jwks(tmp_path)
    data_dir = tmp_path / "other"
    legacy = data_dir / "remote-risk.db"
    data_dir.mkdir()
    with sqlite3.connect(legacy) as connection:  # as an earlier version left it
        connection.execute("CREATE TABLE kept_by_the_earlier_version (x INTEGER)")
    started(sdk_member(data_dir, jwks))
    assert not (data_dir / "sdk-member.db").exists()
    with sqlite3.connect(legacy) as connection:
        (owner,) = connection.execute("SELECT name FROM remote_risk_database_member").fetchone()
    assert owner == "sdk_member"


def test_another_member_in_the_same_data_directory_is_refused_at_start(tmp_path: Path) -> None:
    """A data directory holds a member's keys as well as its database file: another
    member started in it would sign with the same key, the same identity to every
    coordinator. It is refused, with one line naming both; a replica is not."""
    jwks = trusted_jwks(tmp_path)
    shared = tmp_path / "shared"
    terms = terms_member(shared, jwks)
    try:
        assert terms.stdout is not None
        assert terms.stdout.readline().startswith("legal_terms listening on ")
        started(terms_member(shared, jwks))  # a replica
        other = sdk_member(shared, jwks)
        out, err = other.communicate(timeout=60)
    finally:
        terms.terminate()
        terms.communicate(timeout=30)
    assert other.returncode == 2, (out, err)
    (line,) = err.strip().splitlines()
    assert line.startswith("sdk-member: error: data_directory_of_another_member: ")
    assert "'legal_terms'" in line and "'sdk_member'" in line
    assert not (shared / "sdk-member.db").exists()
