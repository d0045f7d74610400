"""`federation keys` shows and rotates the coordinator's signing keys without breaking tokens."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent_cards.keys import TrustedKeys
from contracts.grant import Actor, Budget, Grant, Handoff, StateRef
from coordinator.authority.identity import coordinator_keys
from coordinator.authority.tokens import mint_token
from coordinator.cli.main import main
from coordinator.storage.datadir import DataDir
from member_kit.trust.verifier import DelegationVerifier

AUDIENCE = "http://127.0.0.1:9/a2a/jsonrpc"


def token(data: Path) -> str:
    now = int(time.time())
    grant = Grant(
        iss="urn:a2a-federation:coordinator",
        sub="operator",
        aud=AUDIENCE,
        iat=now,
        nbf=now,
        exp=now + 60,
        jti=f"jti-{now}-{time.monotonic_ns()}",
        scope="risk:interpret",
        tenant="default",
        act=Actor(sub="urn:a2a-federation:coordinator"),
        handoff=Handoff(
            id="ho-1",
            attempt=1,
            duplicate_key="k",
            state_ref=StateRef(id="run-1", version=0),
            final_owner="coordinator",
            budget=Budget(actions=1, context_units=10, effects=0),
        ),
    )
    return mint_token(grant, coordinator_keys(DataDir(data)).active)


def verify(data: Path, raw: str) -> str:
    jwks = TrustedKeys.from_file(data / "jwks.json")
    verifier = DelegationVerifier({"urn:a2a-federation:coordinator": jwks}, AUDIENCE)
    return verifier.verify(
        raw,
        skill_id="interpret-risk-policy",
        required_scopes=frozenset({"risk:interpret"}),
        handoff_id="ho-1",
        read_only=True,
    ).kid


def test_rotation_keeps_earlier_tokens_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a rotation the JWKS holds both keys; tokens of either verify; new ones use the new
    once it is activated."""
    assert main(["--data-dir", str(tmp_path), "keys", "show"]) == 0
    before = json.loads(capsys.readouterr().out)["keys"]
    old_token = token(tmp_path)
    assert main(["--data-dir", str(tmp_path), "keys", "rotate", "--grace-seconds", "600"]) == 0
    assert main(["--data-dir", str(tmp_path), "keys", "rotate", "--activate"]) == 0
    capsys.readouterr()
    assert main(["--data-dir", str(tmp_path), "keys", "show"]) == 0
    after = json.loads(capsys.readouterr().out)["keys"]
    assert len(before) == 1 and len(after) == 2
    assert verify(tmp_path, old_token) == before[0]["kid"]
    new_kid = verify(tmp_path, token(tmp_path))
    assert new_kid != before[0]["kid"] and new_kid in {k["kid"] for k in after}


def test_the_parser_default_publication_delay_is_the_identity_default() -> None:
    from coordinator.authority import identity
    from coordinator.cli import parser

    assert parser.PUBLISH_SECONDS == identity.DEFAULT_PUBLISH_SECONDS


def test_an_at_once_rotation_says_what_remotes_do_meanwhile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator's choice stands; the output says that a remote refuses the new key
    (kid_unknown) until it fetches it, and that such a handoff is sent once more."""
    argv = ["--data-dir", str(tmp_path), "keys", "rotate", "--publish-seconds", "0"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("active key is now ") and "kid_unknown" in out
    assert main(["--data-dir", str(tmp_path), "keys", "rotate"]) == 0
    assert "kid_unknown" not in capsys.readouterr().out, "a published key needs no such note"
