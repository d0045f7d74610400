"""An address belongs to one registered agent, whatever it is spelled like, and only the
operator moves it.

The rule first (names looked up as the dialer would: loopback only), then real processes
on loopback: remote_risk (``python -m remote_risk``), a rogue agent
(``python -m tests.rogue_card_agent``) whose card names remote_risk's JSON-RPC URL, and
the coordinator's CLI. What must hold:

* a card naming another agent's address in another spelling (``localhost``, ``127.1``,
  ``2130706433``, ``[::ffff:127.0.0.1]``, a trailing dot, upper case) is refused
  (``interface_of_other_agent``), even when the operator allowed that spelling;
* an agent that registered first with a card naming another agent's address does not
  keep that agent out: the refusal names it, and the operator gives the address to the
  later agent (``--take-address-from NAME``), which removes the holder; naming an agent
  that holds nothing the card names is refused (``address_not_held``), and naming one
  while another holder remains gives nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from contracts.wire import PROTOCOL_VERSION, AgentInterface
from coordinator.authority.identity import coordinator_keys
from coordinator.errors import RegistryError
from coordinator.remote.wire.destinations import Destinations, Neighbour, check_card_resolved
from coordinator.storage.datadir import DataDir
from remote_risk.service import risk_card
from tests.processes import RemoteRiskProcess, registered
from tests.servers import free_port

VICTIM = Neighbour(
    "remote-risk",
    "http://127.0.0.1:9000/.well-known/agent-card.json",
    ("http://127.0.0.1:9000/a2a/jsonrpc",),
)
SPELLINGS = ["localhost", "LOCALHOST.", "127.1", "2130706433", "0x7f.0.0.1", "[::ffff:127.0.0.1]"]


def _reason(spelling: str) -> RegistryError:
    """The refusal of a card on 127.0.0.2 naming the victim's endpoint as ``spelling``,
    the operator having allowed that spelling's origin."""
    own = "http://127.0.0.2:8000"
    interfaces = [
        AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION)
        for url in (own + "/a2a/jsonrpc", f"http://{spelling}:9000/a2a/jsonrpc")
    ]
    card = risk_card(own).model_copy(update={"supported_interfaces": interfaces})
    allowed = Destinations(own + "/.well-known/agent-card.json", (f"{spelling}:9000",))
    with pytest.raises(RegistryError) as refused:
        asyncio.run(check_card_resolved(card, allowed, [VICTIM]))
    return refused.value


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_another_spelling_of_an_agents_address_is_that_address(spelling: str) -> None:
    refused = _reason(spelling)
    assert refused.reason == "interface_of_other_agent"
    assert "'remote-risk'" in str(refused)


# --- real processes -------------------------------------------------------------------------


def federation(data: DataDir, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FEDERATION_DATA_DIR": str(data.root)}
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True, text=True, timeout=90, env=env,
    )  # fmt: skip


def refused_with(done: subprocess.CompletedProcess[str], reason: str) -> str:
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"federation: error: {reason}: "), lines[0]
    return lines[0]


def stored_agents(data: DataDir) -> dict[str, Any]:
    path = data.path("agents.json")
    return json.loads(path.read_text()) if path.exists() else {}


@contextmanager
def rogue_agent(root: Path, victim: str) -> Iterator[tuple[str, Path, Path]]:
    """The rogue as its own process, its card naming ``victim``: its base URL, its JWK
    file and the file of the tokens it received."""
    port = free_port()
    jwk, tokens = root / "rogue.jwk", root / "rogue-tokens.txt"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.rogue_card_agent", "--port", str(port), "--victim", victim,
         "--jwk-out", str(jwk), "--tokens-out", str(tokens)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip().startswith("rogue listening on ")
        yield f"http://127.0.0.1:{port}", jwk, tokens
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_registered_agents_address_in_another_spelling_is_refused(tmp_path: Path) -> None:
    with registered(tmp_path) as (data, remote):
        (holder,) = stored_agents(data)
        spelled = remote.base_url.replace("127.0.0.1", "localhost")
        with rogue_agent(tmp_path, spelled + "/a2a/jsonrpc") as (rogue, jwk, tokens):
            done = federation(
                data, "register", rogue, "--name", "rogue", "--trust-key", str(jwk),
                "--allow-origin", spelled,
            )  # fmt: skip
            line = refused_with(done, "interface_of_other_agent")
            assert f"{holder!r}" in line
            assert tokens.read_text() == ""
        assert "rogue" not in stored_agents(data)


@contextmanager
def unregistered_remote(root: Path) -> Iterator[tuple[DataDir, RemoteRiskProcess, Path]]:
    """A coordinator data directory and a running remote_risk not registered in it, with
    remote_risk's card keys written to a JWK Set file."""
    data = DataDir(root / "coordinator")
    coordinator_keys(data)
    process = RemoteRiskProcess(root / "remote", data.path("jwks.json"))
    keys = root / "remote-risk.jwks"
    keys.write_text(json.dumps(process.keys.trusted_keys().to_jwks()))
    process.start()
    try:
        yield data, process, keys
    finally:
        process.stop()


def test_the_first_registrant_of_an_address_does_not_keep_its_agent_out(tmp_path: Path) -> None:
    with unregistered_remote(tmp_path) as (data, remote, keys):
        with rogue_agent(tmp_path, remote.base_url + "/a2a/jsonrpc") as (rogue, jwk, _):
            first = federation(
                data, "register", rogue, "--name", "rogue", "--trust-key", str(jwk),
                "--allow-origin", remote.base_url,
            )  # fmt: skip
            assert first.returncode == 0, first.stderr
        real = ("register", remote.base_url, "--name", "risk", "--trust-key", str(keys))
        line = refused_with(federation(data, *real), "interface_of_other_agent")
        assert "'rogue'" in line and "--take-address-from rogue" in line
        wrong = federation(data, *real, "--take-address-from", "nobody")
        assert "'rogue'" in refused_with(wrong, "interface_of_other_agent")
        assert set(stored_agents(data)) == {"rogue"}
        done = federation(data, *real, "--take-address-from", "rogue")
        assert done.returncode == 0, done.stderr
        assert set(stored_agents(data)) == {"risk"}
        again = federation(data, *real, "--take-address-from", "rogue")
        refused_with(again, "address_not_held")
