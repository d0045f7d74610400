"""Where remote_risk's trusted issuers and own keys come from: flags, environment, files, URLs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from agent_cards.keys import SigningKey, TrustedKeys, load_or_create
from contracts import strict_json
from member_kit.trust import issuers as trust
from member_kit.trust.issuers import TrustConfigError
from remote_risk.__main__ import main
from tests.servers import running

KEY = SigningKey.generate()
JWKS = strict_json.dumps({"keys": [KEY.public_jwk()]})


@pytest.fixture(scope="module")
def jwks_server() -> Iterator[str]:
    async def jwks(request: Request) -> Response:
        return Response(JWKS, media_type="application/json")

    async def moved(request: Request) -> Response:
        return RedirectResponse("/jwks.json")

    async def huge(request: Request) -> Response:
        return Response(b" " * (trust.MAX_JWKS_BYTES + 1) + JWKS, media_type="application/json")

    app = Starlette(
        routes=[
            Route("/jwks.json", jwks),
            Route("/moved", moved),
            Route("/huge", huge),
        ]
    )
    with running(app) as url:
        yield url


def write_jwks(tmp_path: Path, document: bytes = JWKS) -> Path:
    path = tmp_path / "coordinator.jwks.json"
    path.write_bytes(document)
    return path


def test_flags_win_over_the_environment() -> None:
    """Given --trust-issuer flags, REMOTE_RISK_TRUST_ISSUERS is not read."""
    environ = {trust.TRUST_ENV_VAR: "env=/x"}
    assert trust.issuer_entries(["flag=/y"], environ) == ["flag=/y"]


def test_environment_entries_split_on_whitespace_and_commas() -> None:
    """Without flags, the environment's entries are split on any run of spaces and commas."""
    environ = {trust.TRUST_ENV_VAR: " a=/one, b=https://h/jwks.json\n c=/three "}
    assert trust.issuer_entries(None, environ) == ["a=/one", "b=https://h/jwks.json", "c=/three"]
    assert trust.issuer_entries(None, {}) == []


@pytest.mark.parametrize("entry", ["no-separator", "issuer=", "bad issuer=/x", "=/x"])
def test_malformed_entries_are_refused(entry: str) -> None:
    """An entry without ISSUER=SOURCE, or whose issuer is not a plain identifier, is refused."""
    with pytest.raises(TrustConfigError):
        trust.parse_entry(entry)


def test_issuer_is_everything_before_the_first_equals_sign() -> None:
    """The source may contain '=' (a query string); the issuer may not."""
    assert trust.parse_entry("urn:x:coord=https://h/jwks?v=1") == (
        "urn:x:coord",
        "https://h/jwks?v=1",
    )


def test_file_source_is_read(tmp_path: Path) -> None:
    """A file source holding a JWK Set yields that issuer's pinned keys."""
    trusted = trust.load_trusted_issuers([f"coordinator={write_jwks(tmp_path)}"])
    assert KEY.kid in trusted["coordinator"]


def test_an_issuer_named_twice_is_refused(tmp_path: Path) -> None:
    """Two entries for one issuer are ambiguous and refused."""
    path = write_jwks(tmp_path)
    with pytest.raises(TrustConfigError, match="twice"):
        trust.load_trusted_issuers([f"c={path}", f"c={path}"])


@pytest.mark.parametrize(
    "document",
    [b"not json", b'{"keys": []}', strict_json.dumps({"keys": [{"kty": "oct", "k": "AAAA"}]})],
)
def test_unusable_key_files_are_refused(tmp_path: Path, document: bytes) -> None:
    """A file that is not a usable public JWK Set stops the start with a readable error."""
    with pytest.raises(TrustConfigError):
        trust.load_trusted_issuers([f"c={write_jwks(tmp_path, document)}"])


def test_missing_key_file_is_refused(tmp_path: Path) -> None:
    """A source file that does not exist is a configuration error, not a traceback."""
    with pytest.raises(TrustConfigError, match="cannot read"):
        trust.load_trusted_issuers([f"c={tmp_path / 'absent.json'}"])


def test_url_source_is_fetched_once(jwks_server: str) -> None:
    """An http(s) source is fetched and parsed as the issuer's keys."""
    trusted = trust.load_trusted_issuers([f"c={jwks_server}/jwks.json"])
    assert KEY.kid in trusted["c"]


@pytest.mark.parametrize(("path", "problem"), [("/moved", "HTTP 307"), ("/huge", "larger")])
def test_url_source_redirect_and_oversize_are_refused(
    jwks_server: str, path: str, problem: str
) -> None:
    """A redirect is not followed and a body above the size cap is refused."""
    with pytest.raises(TrustConfigError, match=problem):
        trust.load_trusted_issuers([f"c={jwks_server}{path}"])


def test_unreachable_url_is_refused() -> None:
    """A URL nobody answers at is a one-line configuration error."""
    with pytest.raises(TrustConfigError, match="cannot fetch"):
        trust.fetch_jwks("http://127.0.0.1:1/jwks.json")


def test_data_dir_precedence(tmp_path: Path) -> None:
    """--data-dir, then REMOTE_RISK_DATA_DIR, then XDG_DATA_HOME/a2a-federation/remote-risk."""
    environ = {trust.DATA_DIR_ENV_VAR: str(tmp_path / "env"), "XDG_DATA_HOME": str(tmp_path)}
    assert trust.data_dir(str(tmp_path / "flag"), environ) == tmp_path / "flag"
    assert trust.data_dir(None, environ) == tmp_path / "env"
    assert trust.data_dir(None, {"XDG_DATA_HOME": str(tmp_path)}) == (
        tmp_path / "a2a-federation" / "remote-risk"
    )


def test_own_keys_persist_in_the_data_dir(tmp_path: Path) -> None:
    """The key set is created under DATA_DIR/keys on first use and the same key is loaded later."""
    first = trust.signing_keys(None, tmp_path)
    assert trust.signing_keys(None, tmp_path).active.kid == first.active.kid
    assert load_or_create(tmp_path / "keys").active.kid == first.active.kid


def test_key_file_is_used_instead_of_the_data_dir(tmp_path: Path) -> None:
    """--key-file signs with that key, and nothing is written to the data directory."""
    key_file = tmp_path / "signing.pem"
    key_file.write_bytes(KEY.private_pem())
    keys = trust.signing_keys(str(key_file), tmp_path / "data")
    assert keys.active.kid == KEY.kid
    assert not (tmp_path / "data").exists()


def test_public_key_file_as_signing_key_is_refused(tmp_path: Path) -> None:
    """A key file without private material is a configuration error."""
    key_file = write_jwks(tmp_path, strict_json.dumps(KEY.public_jwk()))
    with pytest.raises(TrustConfigError):
        trust.signing_keys(str(key_file), tmp_path)


def test_main_refuses_to_run_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a trusted issuer or --insecure-anonymous, main exits 2 with one line on stderr
    and creates no keys."""
    monkeypatch.delenv(trust.TRUST_ENV_VAR, raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["--port", "0", "--data-dir", str(tmp_path / "data")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("remote_risk: error: no trusted issuer")
    assert not (tmp_path / "data").exists()


def test_main_reports_a_bad_trust_source_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unreadable JWK Set ends main with exit status 2 and one line, never a traceback."""
    with pytest.raises(SystemExit) as exited:
        main(["--trust-issuer", f"c={tmp_path / 'absent.json'}", "--data-dir", str(tmp_path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read JWK Set" in err


def test_trusted_keys_round_trip_through_a_file(tmp_path: Path) -> None:
    """What the coordinator writes as its JWK Set is what remote_risk pins."""
    path = write_jwks(tmp_path, strict_json.dumps(TrustedKeys([KEY.verification_key()]).to_jwks()))
    assert KEY.kid in trust.load_keys("c", str(path))
