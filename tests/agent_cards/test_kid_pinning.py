"""A kid is the RFC 7638 thumbprint we compute, never a label we are told (issue 13).

The attack these tests replay: a rogue server serves the real risk card with its interface
URL changed, signed by the attacker's own key under the real kid in the JWS header, and a
JWK Set holding the attacker's key labelled with the real kid. ``register --expect-kid
REAL`` must refuse it with ``kid_not_thumbprint`` and store nothing. Every other place a
public key enters (pinned key files, the API's trust_key, --trust-issuer files and URLs,
ledger heads) refuses a JWK whose kid is not its thumbprint with the same code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_cards.keys import (
    KID_NOT_THUMBPRINT,
    KeyMaterialError,
    SigningKey,
    TrustedKeys,
    VerificationKey,
    b64url_encode,
    signing_key_from_jwk,
)
from agent_cards.signing import canonical_card
from contracts import strict_json
from coordinator.audit import ledger
from coordinator.audit.log import signing
from coordinator.cli.main import main
from member_kit.trust.issuers import TrustConfigError, load_trusted_issuers
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.servers import free_port, running

REAL = SigningKey.generate()
ATTACKER = SigningKey.generate()


def labelled(key: SigningKey, kid: str) -> dict[str, str]:
    """``key``'s public JWK with ``kid`` written next to it (what a liar publishes)."""
    return {**key.public_jwk(), "kid": kid}


def unlabelled(key: SigningKey) -> dict[str, str]:
    return {name: value for name, value in key.public_jwk().items() if name != "kid"}


def signed_as(card: dict[str, Any], key: SigningKey, header_kid: str) -> dict[str, Any]:
    """``card`` signed by ``key`` with ``header_kid`` in the protected header."""
    unsigned = {name: value for name, value in card.items() if name != "signatures"}
    protected = b64url_encode(strict_json.dumps({"alg": "EdDSA", "kid": header_kid, "typ": "JOSE"}))
    signing_input = f"{protected}.{b64url_encode(canonical_card(unsigned))}".encode("ascii")
    signature = key.private_key.sign(signing_input)  # type: ignore[call-arg]
    return {
        **unsigned,
        "signatures": [{"protected": protected, "signature": b64url_encode(signature)}],
    }


class Rogue:
    """A card server on loopback that serves what the attacker wants."""

    def __init__(self) -> None:
        self.card: dict[str, Any] = {}
        self.jwks: dict[str, Any] = {}

    async def card_route(self, request: Request) -> Response:
        return JSONResponse(self.card)

    async def jwks_route(self, request: Request) -> Response:
        return JSONResponse(self.jwks)


@pytest.fixture(scope="module")
def real_card() -> Iterator[dict[str, Any]]:
    """The card the real risk service serves, signed with REAL."""
    from agent_cards.keys import KeySet

    settings = Settings(signing_keys=KeySet(active=REAL), insecure_anonymous=True)
    app = create_app(settings)
    port = free_port()
    import httpx

    with running(app, port=port) as base:
        yield httpx.get(f"{base}/.well-known/agent-card.json").json()


@pytest.fixture
def rogue() -> Iterator[tuple[Rogue, str]]:
    server = Rogue()
    app = Starlette(
        routes=[
            Route("/.well-known/agent-card.json", server.card_route),
            Route("/.well-known/jwks.json", server.jwks_route),
        ]
    )
    with running(app) as base:
        yield server, base


def forged(real_card: dict[str, Any], base: str) -> dict[str, Any]:
    """The real card with its interface moved to ``base``, signed by the attacker as REAL."""
    card = json.loads(json.dumps(real_card))
    for interface in card["supportedInterfaces"]:
        interface["url"] = f"{base}/a2a/jsonrpc"
    return signed_as(card, ATTACKER, REAL.kid)


def register(
    capsys: pytest.CaptureFixture[str], data: Path, url: str, *flags: str
) -> tuple[int, str]:
    """The exit code and the reason on the one error line (``federation: error: R: ...``)."""
    code = main(["--data-dir", str(data), "register", url, *flags])
    err = capsys.readouterr().err
    return code, f"[{err.split(': ')[2]}]" if err.startswith("federation: error: ") else err


def test_spoofed_expect_kid_is_refused_and_nothing_is_stored(
    real_card: dict[str, Any],
    rogue: tuple[Rogue, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The observed attack: the attacker's key labelled with the real kid is refused."""
    server, base = rogue
    server.card = forged(real_card, base)
    server.jwks = {"keys": [labelled(ATTACKER, REAL.kid)]}
    code, err = register(capsys, tmp_path, base, "--expect-kid", REAL.kid)
    assert code == 2
    assert f"[{KID_NOT_THUMBPRINT}]" in err
    assert not (tmp_path / "agents.json").exists()


@pytest.mark.parametrize(
    ("jwks", "reason"),
    [
        # the attacker's key under its own (true) kid: the real kid is simply not served
        (lambda: {"keys": [ATTACKER.public_jwk()]}, "card_kid_unknown"),
        # no kid at all: the computed one is the attacker's, not the real one
        (lambda: {"keys": [unlabelled(ATTACKER)]}, "card_kid_unknown"),
        # a kid that is not even a string
        (lambda: {"keys": [{**ATTACKER.public_jwk(), "kid": None}]}, "jwks_invalid"),
        # the real public key copied: the forged signature does not verify with it
        (lambda: {"keys": [REAL.public_jwk()]}, "card_signature_invalid"),
        # both, the attacker's labelled as the real one: the whole set is refused
        (
            lambda: {"keys": [REAL.public_jwk(), labelled(ATTACKER, REAL.kid)]},
            KID_NOT_THUMBPRINT,
        ),
    ],
)
def test_every_variant_of_the_spoof_is_refused(
    real_card: dict[str, Any],
    rogue: tuple[Rogue, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    jwks: Any,
    reason: str,
) -> None:
    server, base = rogue
    server.card = forged(real_card, base)
    server.jwks = jwks()
    code, err = register(capsys, tmp_path, base, "--expect-kid", REAL.kid)
    assert (code, f"[{reason}]" in err) == (2, True), err
    assert not (tmp_path / "agents.json").exists()


def test_the_real_card_still_registers_with_expect_kid(
    real_card: dict[str, Any],
    rogue: tuple[Rogue, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A card signed by the real key, re-served with the real JWK Set, is accepted."""
    server, base = rogue
    card = json.loads(json.dumps(real_card))
    for interface in card["supportedInterfaces"]:
        interface["url"] = f"{base}/a2a/jsonrpc"
    server.card = signed_as(card, REAL, REAL.kid)
    server.jwks = {"keys": [REAL.public_jwk()]}
    code, err = register(capsys, tmp_path, base, "--expect-kid", REAL.kid)
    assert code == 0, err
    stored = json.loads((tmp_path / "agents.json").read_text())
    (agent,) = stored.values()
    assert agent["verified_kid"] == REAL.kid


def test_pinned_key_file_with_a_foreign_kid_is_refused(
    real_card: dict[str, Any],
    rogue: tuple[Rogue, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--trust-key: a file labelling the attacker's key with the real kid is refused."""
    server, base = rogue
    server.card = forged(real_card, base)
    pinned = tmp_path / "pinned.json"
    pinned.write_text(json.dumps({"keys": [labelled(ATTACKER, REAL.kid)]}))
    code, err = register(capsys, tmp_path / "data", base, "--trust-key", str(pinned))
    assert code == 2 and f"[{KID_NOT_THUMBPRINT}]" in err
    assert not (tmp_path / "data" / "agents.json").exists()


def test_trust_issuer_file_and_url_with_a_foreign_kid_are_refused(
    rogue: tuple[Rogue, str], tmp_path: Path
) -> None:
    """--trust-issuer: a JWK Set (file or URL) whose kid is not the thumbprint stops start."""
    server, base = rogue
    server.jwks = {"keys": [labelled(ATTACKER, REAL.kid)]}
    path = tmp_path / "issuer.json"
    path.write_text(json.dumps(server.jwks))
    for source in (str(path), f"{base}/.well-known/jwks.json"):
        with pytest.raises(TrustConfigError) as caught:
            load_trusted_issuers([f"urn:coordinator={source}"])
        assert caught.value.reason == KID_NOT_THUMBPRINT
        assert KID_NOT_THUMBPRINT in str(caught.value)


def test_no_constructor_pins_a_key_under_another_kid() -> None:
    """VerificationKey, SigningKey, TrustedKeys and private JWKs all compute the kid."""
    public = ATTACKER.private_key.public_key()
    with pytest.raises(KeyMaterialError) as caught:
        VerificationKey(REAL.kid, "EdDSA", public)
    assert caught.value.reason == KID_NOT_THUMBPRINT
    with pytest.raises(KeyMaterialError):
        SigningKey(REAL.kid, "EdDSA", ATTACKER.private_key)
    with pytest.raises(KeyMaterialError):
        TrustedKeys.from_json(labelled(ATTACKER, REAL.kid))
    raw = ATTACKER.private_key.private_bytes_raw()  # type: ignore[union-attr]
    with pytest.raises(KeyMaterialError):
        signing_key_from_jwk({**labelled(ATTACKER, REAL.kid), "d": b64url_encode(raw)})


def test_a_jwk_without_kid_gets_its_thumbprint() -> None:
    (key,) = TrustedKeys.from_json(unlabelled(ATTACKER))
    assert key.kid == ATTACKER.kid


def test_ledger_head_with_a_foreign_kid_is_refused() -> None:
    """A signed ledger head checked against a JWK labelled with another kid is refused."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    token = signing.sign(
        {"seq": 1, "hash": "h", "issued_at": "t", "iss": "c"}, private, ledger.HEAD_TYP
    )
    jwk = {**ledger.public_jwk(private), "kid": REAL.kid}
    with pytest.raises(ledger.LedgerError) as caught:
        ledger.verify_head(token, jwk)
    assert caught.value.reason == KID_NOT_THUMBPRINT


def test_serve_risk_refuses_to_start_with_a_foreign_kid(
    rogue: tuple[Rogue, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`serve risk --trust-issuer ISSUER=URL` stops with one line naming kid_not_thumbprint."""
    from remote_risk.__main__ import main as serve_risk

    server, base = rogue
    server.jwks = {"keys": [labelled(ATTACKER, REAL.kid)]}
    with pytest.raises(SystemExit) as stopped:
        serve_risk(
            [
                "--data-dir",
                str(tmp_path / "risk"),
                "--trust-issuer",
                f"urn:a2a-federation:coordinator={base}/.well-known/jwks.json",
            ]
        )
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("remote_risk: error: ") and KID_NOT_THUMBPRINT in err
