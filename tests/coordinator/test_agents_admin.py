"""`federation agents show / pending / remove`, and `register --approve` keeping its pins.

The card host is a real loopback server whose card and JWK Set a test changes, as a
remote team would when it redeploys with a new key and a wider card.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey
from agent_cards.signing import SPEC_FORM
from coordinator.cli.main import main
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.coordinator.test_api import TOKEN, deployed
from tests.coordinator.test_registry import KEY, CardHost, card
from tests.servers import free_port, running

SKILL = "interpret-risk-policy"


@pytest.fixture
def host() -> Iterator[CardHost]:
    port = free_port()
    card_host = CardHost(f"http://127.0.0.1:{port}")
    app = Starlette(
        routes=[
            Route("/.well-known/agent-card.json", card_host.card),
            Route("/.well-known/jwks.json", card_host.keys),
        ]
    )
    with running(app, port=port):
        yield card_host


def cli(capsys: pytest.CaptureFixture[str], data: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--data-dir", str(data), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_show_pending_approve_and_remove(
    host: CardHost, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The path after a redeploy in docs/operations.md: a wider card signed by a new key
    is held; the operator sees what it asks for more, approves it without repeating the
    pin, and can remove the agent."""
    code, _, _ = cli(capsys, tmp_path, "register", host.base, f"--expect-kid={KEY.kid}")
    assert code == 0
    code, out, _ = cli(capsys, tmp_path, "agents", "show", "risk", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["pinned_kids"] == [KEY.kid] and shown["pending"] is None
    assert shown["skill_details"] == [{"id": SKILL, "name": "r", "scopes": ["risk:interpret"]}]
    # Who its tokens are for: the pinned key that verified the card, not a URL it states.
    assert shown["identity"] == identity_of(KEY.verification_key())
    assert shown["verified_form"] == SPEC_FORM and shown["allowed_origins"] == []
    text = cli(capsys, tmp_path, "agents", "show", "risk")[1]
    assert f"identity (its tokens' audience): {shown['identity']}" in text
    assert f"card signed by {KEY.kid} ({SPEC_FORM})" in text
    assert cli(capsys, tmp_path, "agents", "pending")[1].strip() == "no cards held for approval"

    new_key = SigningKey.generate()
    wider: dict[str, Any] = copy.deepcopy(card(host.base))
    wider["skills"][0]["securityRequirements"][0]["schemes"]["delegation"]["list"].append(
        "payments:write"
    )
    host.jwks = {"keys": [new_key.public_jwk()]}
    host.publish(wider, new_key)
    code, _, err = cli(capsys, tmp_path, "register", host.base, f"--expect-kid={new_key.kid}")
    assert code == 1 and "held as pending" in err

    code, out, _ = cli(capsys, tmp_path, "agents", "pending", "--json")
    [held] = json.loads(out)
    assert held["agent"] == "risk" and held["held_kid"] == new_key.kid
    assert held["current_kid"] == KEY.kid and held["held_trust"] == "pinned_kid"
    assert held["diff"]["scopes_added"] == {SKILL: ["payments:write"]}
    assert held["diff"]["skills_added"] == [] and held["diff"]["interfaces_added"] == []
    text = cli(capsys, tmp_path, "agents", "pending")[1]
    assert f"+ scope payments:write (skill {SKILL})" in text and "--approve" in text
    shown_text = cli(capsys, tmp_path, "agents", "show", "risk")[1]
    assert "held card" in shown_text and "binding: JSONRPC 1.0" in shown_text
    assert "\tJSONRPC 1.0\t" in cli(capsys, tmp_path, "agents")[1]

    # --approve alone: the card held is verified again with the pins given when it was held.
    code, out, err = cli(capsys, tmp_path, "register", host.base, "--approve", "--json")
    assert code == 0, err
    approved = json.loads(out)
    assert approved["status"] == "approved" and approved["agent"]["verified_kid"] == new_key.kid
    shown = json.loads(cli(capsys, tmp_path, "agents", "show", "risk", "--json")[1])
    assert shown["pinned_kids"] == [new_key.kid] and shown["trust"] == "pinned_kid"
    assert shown["identity"] == identity_of(new_key.verification_key())
    assert shown["pending"] is None

    code, out, _ = cli(capsys, tmp_path, "agents", "remove", "risk", "--json")
    assert code == 0 and json.loads(out)["name"] == "risk"
    code, _, err = cli(capsys, tmp_path, "agents", "show", "risk")
    assert code == 2 and "unknown_agent" in err
    assert cli(capsys, tmp_path, "agents")[1].strip() == "no agents registered"
    kinds = [e.event_type for e in Workspace(DataDir(tmp_path)).ledger().events()]
    assert "agent.removed" in kinds


def test_approve_adopts_only_the_card_that_was_held(
    host: CardHost, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A card that changed again after it was held is held anew, not approved unseen."""
    assert cli(capsys, tmp_path, "register", host.base, f"--expect-kid={KEY.kid}")[0] == 0
    wider: dict[str, Any] = copy.deepcopy(card(host.base))
    wider["skills"].append({"id": "more", "name": "m", "description": "m", "tags": []})
    host.publish(wider)
    assert cli(capsys, tmp_path, "register", host.base)[0] == 1
    wider["skills"].append({"id": "even-more", "name": "e", "description": "e", "tags": []})
    host.publish(wider)
    code, out, _ = cli(capsys, tmp_path, "register", host.base, "--approve", "--json")
    assert code == 1 and json.loads(out)["status"] == "pending_approval"
    [held] = json.loads(cli(capsys, tmp_path, "agents", "pending", "--json")[1])
    assert held["diff"]["skills_added"] == ["even-more", "more"]


def test_refuse_drops_the_held_card_and_keeps_the_registered_one(
    host: CardHost, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agents refuse`: the held card is gone, the registered card and its pins stay, the
    ledger says so; refusing when nothing is held is refused (no_pending_card)."""
    assert cli(capsys, tmp_path, "register", host.base, f"--expect-kid={KEY.kid}")[0] == 0
    wider: dict[str, Any] = copy.deepcopy(card(host.base))
    wider["skills"].append({"id": "more", "name": "m", "description": "m", "tags": []})
    host.publish(wider)
    assert cli(capsys, tmp_path, "register", host.base)[0] == 1
    code, out, _ = cli(capsys, tmp_path, "agents", "refuse", "risk", "--json")
    assert code == 0 and json.loads(out)["pending_approval"] is False
    shown = json.loads(cli(capsys, tmp_path, "agents", "show", "risk", "--json")[1])
    assert shown["pending"] is None and shown["skills"] == [SKILL]
    assert shown["pinned_kids"] == [KEY.kid]
    code, _, err = cli(capsys, tmp_path, "agents", "refuse", "risk")
    assert code == 2 and "no_pending_card" in err
    kinds = [e.event_type for e in Workspace(DataDir(tmp_path)).ledger().events()]
    assert "card.refused_by_operator" in kinds


def test_agents_routes_and_server_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same commands through --server: GET/DELETE /v1/agents/{name}, /v1/pending-cards."""
    for name in ("FEDERATION_SERVER", "FEDERATION_ISSUER", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with deployed(DataDir(tmp_path / "data")) as d:
        assert d.register().status_code == 200
        detail = d.http.get("/v1/agents/remote-risk")
        assert detail.status_code == 200 and detail.json()["return_contracts"][SKILL]
        assert d.http.get("/v1/pending-cards").json() == []
        assert d.http.get("/v1/agents/nobody").status_code == 404
        monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN", TOKEN)
        assert main(["--server", d.api, "agents", "show", "remote-risk", "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == detail.json()
        assert main(["--server", d.api, "agents", "pending"]) == 0
        assert "no cards held" in capsys.readouterr().out
        assert main(["--server", d.api, "agents", "remove", "remote-risk"]) == 0
        assert "removed remote-risk" in capsys.readouterr().out
        assert d.http.delete("/v1/agents/remote-risk").status_code == 404
        assert d.http.get("/v1/agents").json() == []
