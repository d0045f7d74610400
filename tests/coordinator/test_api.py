"""The coordinator's HTTP API over real loopback HTTP, with a real remote_risk behind it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from coordinator.audit.receipts import grant_recorded
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.cli.main import main
from coordinator.service.http.api import create_api
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.processes import PAYLOAD
from tests.servers import free_port, running

TOKEN = "operator-token-for-tests-0123456789"
SKILL = "interpret-risk-policy"


@dataclass
class Deployment:
    data: Path
    api: str
    risk: str
    risk_app: FastAPI
    http: httpx.Client

    def register(self) -> httpx.Response:
        pins = self.risk_app.state.signing_keys.public_jwks()
        body = {"url": self.risk, "trust_key": pins, "return_finding": [SKILL]}
        return self.http.post("/v1/agents", json=body)

    def delegate(self, **fields: Any) -> httpx.Response:
        body = {"to": "remote-risk", "skill": SKILL, "input": PAYLOAD, **fields}
        return self.http.post("/v1/delegations", json=body)


@contextmanager
def deployed(
    data: DataDir,
    skill_delay_seconds: float = 0.0,
    wrap_risk: Callable[[FastAPI], Any] = lambda app: app,
    audit_token: str | None = None,
) -> Iterator[Deployment]:
    """The coordinator API on a SQLite data directory and a remote_risk trusting its keys
    (served through ``wrap_risk``, an ASGI wrapper a test may use to watch it)."""
    keys = coordinator_keys(data)
    ws = Workspace(data)
    settings = CoordinatorSettings(operator_token=TOKEN, worker_lease_seconds=5.0)
    risk_port = free_port()
    risk_settings = Settings(
        public_base_url=f"http://127.0.0.1:{risk_port}",
        skill_delay_seconds=skill_delay_seconds,
        trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
        audit_token=audit_token,
    )
    risk_app = create_app(risk_settings)
    served = wrap_risk(risk_app)
    with running(served, port=risk_port) as risk, running(create_api(ws, settings)) as api:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=api, headers=headers, timeout=60, trust_env=False) as http:
            yield Deployment(data.root, api, risk, risk_app, http)
    ws.close()


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    """A deployment with no coordinator variables inherited from the environment."""
    for name in (
        "FEDERATION_SERVER",
        "FEDERATION_OPERATOR_TOKEN",
        "FEDERATION_OPERATOR_TOKEN_FILE",
        "FEDERATION_ISSUER",
        "FEDERATION_DATABASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    with deployed(DataDir(tmp_path / "data")) as deployment:
        yield deployment


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "token_missing"),
        ({"Authorization": "Bearer wrong-token-wrong-token-0000"}, "token_invalid"),
        ({"Authorization": f"Bearer {TOKEN}x"}, "token_invalid"),
        ({"Authorization": f"Basic {TOKEN}"}, "token_malformed"),
        ({"Authorization": "Bearer"}, "token_malformed"),
    ],
)
def test_refuses_callers_without_the_operator_token(
    deployment: Deployment, headers: dict[str, str], reason: str
) -> None:
    """Without the right bearer token every /v1 route answers 401 with a challenge."""
    for method, path in [("GET", "/v1/agents"), ("GET", "/v1/runs"), ("POST", "/v1/delegations")]:
        answer = httpx.request(method, deployment.api + path, headers=headers, json={})
        assert answer.status_code == 401
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        assert answer.json()["error"]["reason"] == reason
        assert TOKEN not in answer.text and "wrong-token" not in answer.text


def test_two_authorization_headers_are_refused(deployment: Deployment) -> None:
    """Two Authorization headers, even one of them right, are refused as malformed."""
    headers = [("Authorization", f"Bearer {TOKEN}"), ("Authorization", "Bearer other")]
    answer = httpx.get(deployment.api + "/v1/runs", headers=headers)
    assert answer.status_code == 401
    assert answer.json()["error"]["reason"] == "token_malformed"


def test_public_routes_need_no_token(deployment: Deployment) -> None:
    """The JWKS, the health checks and the OpenAPI schema are public."""
    jwks = httpx.get(deployment.api + "/.well-known/jwks.json").json()
    published = json.loads((deployment.data / "jwks.json").read_text())
    assert jwks == published
    assert httpx.get(deployment.api + "/healthz").json() == {"status": "ok"}
    assert httpx.get(deployment.api + "/livez").json() == {"status": "ok"}
    assert httpx.get(deployment.api + "/openapi.json").status_code == 200


def test_openapi_documents_every_route(deployment: Deployment) -> None:
    """Every route the API serves is in its OpenAPI schema, the /v1 ones with bearer auth."""
    schema = httpx.get(deployment.api + "/openapi.json").json()
    documented = {
        (path, method.upper()) for path, item in schema["paths"].items() for method in item
    }
    assert documented == {
        ("/.well-known/jwks.json", "GET"),
        ("/healthz", "GET"),
        ("/livez", "GET"),
        ("/v1/agents", "POST"),
        ("/v1/agents", "GET"),
        ("/v1/agents/{name}", "GET"),
        ("/v1/agents/{name}", "DELETE"),
        ("/v1/agents/{name}/audit-credential", "PUT"),
        ("/v1/agents/{name}/audit-credential", "DELETE"),
        ("/v1/pending-cards", "GET"),
        ("/v1/pending-cards/{name}", "DELETE"),
        ("/v1/delegations", "POST"),
        ("/v1/runs", "GET"),
        ("/v1/runs/{run_id}", "GET"),
        ("/v1/runs/{run_id}/cancel", "POST"),
        ("/v1/revocations", "POST"),
        ("/status-lists/{run_id}/{handoff_id}", "GET"),
        ("/v1/runs/{run_id}/artifacts/{number}", "GET"),
        ("/v1/audit/verify", "POST"),
        ("/v1/audit/runs/{run_id}", "GET"),
        ("/v1/audit/runs/{run_id}/export", "GET"),
        ("/v1/audit/runs/{run_id}/prove", "POST"),
        ("/v1/audit/consistency", "POST"),
        ("/v1/audit/runs/{run_id}/reconcile", "POST"),
        ("/token-exchange", "POST"),  # a holder's own proof, no operator token
    }
    for path, item in schema["paths"].items():
        for operation in item.values():
            assert bool(operation.get("security")) == path.startswith("/v1/")


def test_register_delegate_and_inspect(deployment: Deployment) -> None:
    """Register, delegate with wait, then runs, run show and the audit routes all answer."""
    registered = deployment.register()
    assert registered.status_code == 200, registered.text
    assert registered.json()["agent"]["name"] == "remote-risk"
    assert [a["name"] for a in deployment.http.get("/v1/agents").json()] == ["remote-risk"]

    answer = deployment.delegate(wait=True, timeout=30.0)
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["local_state"] == "ACCEPTED"
    run_id = document["run_id"]

    runs = deployment.http.get("/v1/runs").json()["runs"]
    assert run_id in [run["run_id"] for run in runs]
    assert deployment.http.get(f"/v1/runs/{run_id}").json()["run_id"] == run_id
    verified = deployment.http.post("/v1/audit/verify").json()
    assert verified["ok"] is True and verified["summary"].startswith("ok")
    assert deployment.http.get(f"/v1/audit/runs/{run_id}").json()["run_id"] == run_id
    bundle = deployment.http.get(f"/v1/audit/runs/{run_id}/export").json()
    checked = deployment.http.post("/v1/audit/verify", json={"bundle": bundle}).json()
    assert checked["ok"] is True
    proof = deployment.http.post(f"/v1/audit/runs/{run_id}/prove").json()
    checked = deployment.http.post("/v1/audit/verify", json={"bundle": proof}).json()
    assert checked["ok"] is True, checked
    heads = {"first": proof["tree_head"], "second": proof["tree_head"]}
    assert deployment.http.post("/v1/audit/consistency", json=heads).json()["consistent"]


def test_submitted_delegation_is_finished_by_the_worker(deployment: Deployment) -> None:
    """Without wait the API answers 202 at once and the background worker ends the handoff."""
    assert deployment.register().status_code == 200
    answer = deployment.delegate(wait=False)
    assert answer.status_code == 202, answer.text
    submitted = answer.json()
    assert set(submitted) == {"run_id", "attempt_id", "state"}
    assert answer.headers["Location"] == f"/v1/runs/{submitted['run_id']}"

    deadline = time.monotonic() + 30
    while True:
        document = deployment.http.get(f"/v1/runs/{submitted['run_id']}").json()
        if not document.get("live_branches"):
            break
        assert time.monotonic() < deadline, "the worker never finished the handoff"
        time.sleep(0.1)
    store = Workspace(DataDir(deployment.data)).run_store()
    stored = store.handoff(submitted["attempt_id"])
    assert stored is not None and stored[0].state.value == "ACCEPTED"
    assert len(deployment.risk_app.state.task_store) == 1


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({"to": "nobody", "skill": SKILL, "input": {}}, 404, "unknown_agent"),
        ({"to": "remote-risk", "skill": SKILL, "input": {}, "timeout": "30"}, 422, None),
        ({"to": "remote-risk", "skill": SKILL, "input": {}, "extra": 1}, 422, None),
        ({"to": "remote-risk", "skill": SKILL, "input": {}, "wait": 1}, 422, None),
        ({"to": "remote-risk", "skill": SKILL, "input": [], "wait": True}, 422, None),
        ({"to": "remote-risk", "skill": SKILL, "input": {}, "tenant": "a b"}, 422, None),
    ],
)
def test_bad_delegations_get_a_typed_error(
    deployment: Deployment, body: dict[str, Any], status: int, reason: str | None
) -> None:
    """Unknown agents are 404 and ill-typed or extra fields 422, each with a stable reason."""
    answer = deployment.http.post("/v1/delegations", json=body)
    assert answer.status_code == status
    assert answer.json()["error"]["reason"] == (reason or "invalid_request")
    assert "Traceback" not in answer.text


def test_unknown_run_and_non_strict_json(deployment: Deployment) -> None:
    """An unknown run is 404 on every run route; a body with duplicate keys is refused."""
    for path in ("/v1/runs/nope", "/v1/audit/runs/nope", "/v1/audit/runs/nope/export"):
        answer = deployment.http.get(path)
        assert answer.status_code == 404
        assert answer.json()["error"]["reason"] == "unknown_run"
    duplicate = b'{"url": "http://127.0.0.1:9", "url": "http://127.0.0.1:8"}'
    answer = deployment.http.post(
        "/v1/agents", content=duplicate, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 422
    assert answer.json()["error"]["reason"] == "body_not_json"


def test_unreachable_remote_is_a_bad_gateway(deployment: Deployment) -> None:
    """Registering an agent nobody answers for is 502 with the transport reason."""
    answer = deployment.http.post(
        "/v1/agents", json={"url": f"http://127.0.0.1:{free_port()}", "trust_on_first_use": True}
    )
    assert answer.status_code == 502
    assert answer.json()["error"]["reason"] == "card_unreachable"


def test_delegation_with_wait_has_one_driver(tmp_path: Path) -> None:
    """A handoff the API drives inline is not also resumed by the background worker."""
    with deployed(DataDir(tmp_path / "data"), skill_delay_seconds=1.0) as deployment:
        assert deployment.register().status_code == 200
        document = deployment.delegate(wait=True).json()
        assert document["local_state"] == "ACCEPTED"
        time.sleep(0.5)
        events = Workspace(DataDir(deployment.data)).ledger().events(document["run_id"])
        kinds = [event.event_type for event in events]
        assert "handoff.resumed" not in kinds
        grants = [e for e in events if grant_recorded(e.event_type, e.data) is not None]
        assert len(grants) == 1


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_cli_with_server_prints_what_the_local_cli_prints(
    deployment: Deployment, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `--server`, register, agents, runs, run show and audit print the local output."""
    assert deployment.register().status_code == 200
    run_id = deployment.delegate(wait=True).json()["run_id"]
    monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN", TOKEN)
    local = ["--data-dir", str(deployment.data)]
    remote = ["--server", deployment.api]
    pins = deployment.data.parent / "risk-jwks.json"
    pins.write_text(json.dumps(deployment.risk_app.state.signing_keys.public_jwks()))
    register = ["register", deployment.risk, "--trust-key", str(pins)]
    for command in (
        register,
        ["agents"],
        ["agents", "--json"],
        ["runs"],
        ["runs", "--json"],
        ["run", "show", run_id],
        ["audit", "show", run_id],
        ["audit", "verify"],
    ):
        assert _cli(capsys, *remote, *command) == _cli(capsys, *local, *command), command


def test_cli_with_server_delegates_and_reports_errors(
    deployment: Deployment,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Through --server the CLI delegates, and a refusal or a wrong token is one line, exit 2."""
    assert deployment.register().status_code == 200
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    monkeypatch.setenv("FEDERATION_SERVER", deployment.api)
    monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN", TOKEN)
    code, out = _cli(
        capsys, "delegate", "--to", "remote-risk", "--skill", SKILL, "--input", str(input_file)
    )
    assert code == 0 and "local state: ACCEPTED" in out

    assert main(["run", "show", "no-such-run"]) == 2
    assert "error: unknown_run: " in capsys.readouterr().err

    monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN", "not-the-operator-token-0123456789abcdef")
    assert main(["agents"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("error: token_invalid: " in err)
    assert "not-the-operator-token" not in err

    monkeypatch.delenv("FEDERATION_OPERATOR_TOKEN")
    assert main(["agents"]) == 2
    assert "error: operator_token_missing: " in capsys.readouterr().err


WANTS_A_VERDICT = {"type": "object", "required": ["verdict"]}


def test_return_contracts_travel_through_the_api_and_server_cli(
    deployment: Deployment,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A delegation's return schema, given in the API body or with `--server delegate
    --return-schema`, judges the return; a skill registered through `--server register`
    without a declared contract admits nothing; an unusable schema is a 422."""
    assert deployment.register().status_code == 200
    answer = deployment.delegate(return_schema=WANTS_A_VERDICT).json()
    assert answer["local_state"] == "REJECTED"
    assert answer["reason"] == 'schema_mismatch: at $: required ["verdict"]'
    refused = deployment.delegate(return_schema={"type": "nope"})
    assert refused.status_code == 422
    assert refused.json()["error"]["reason"] == "return_schema_invalid"

    monkeypatch.setenv("FEDERATION_SERVER", deployment.api)
    monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN", TOKEN)
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(WANTS_A_VERDICT))
    delegate = ["delegate", "--skill", SKILL, "--input", str(input_file), "--json"]
    code, out = _cli(capsys, *delegate, "--to", "remote-risk", "--return-schema", str(schema_file))
    assert code == 1 and json.loads(out)["reason"].startswith("schema_mismatch: ")

    key_file = tmp_path / "risk-keys.json"
    key_file.write_text(json.dumps(deployment.risk_app.state.signing_keys.public_jwks()))
    # one address is one agent: each registration of the same service replaces the last
    register = ["register", deployment.risk, "--trust-key", str(key_file), "--name", "plain"]
    assert _cli(capsys, "agents", "remove", "remote-risk")[0] == 0
    assert _cli(capsys, *register)[0] == 0
    code, out = _cli(capsys, *delegate, "--to", "plain")
    assert code == 1 and json.loads(out)["local_state"] == "RETURNED_UNVERIFIED"
    declared = [*register[:-1], "declared", "--return-finding", SKILL]
    assert _cli(capsys, "agents", "remove", "plain")[0] == 0
    assert _cli(capsys, *declared)[0] == 0
    code, out = _cli(capsys, *delegate, "--to", "declared")
    assert code == 0 and json.loads(out)["return_contract"]["kind"] == "finding"


class PeerPorts:
    """An ASGI wrapper noting the client port of every JSON-RPC call to the wrapped app."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.ports: list[int] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope.get("client"):
            self.ports.append(scope["client"][1])
        await self.app(scope, receive, send)


def test_delegations_of_a_serving_coordinator_share_one_connection_pool(
    tmp_path: Path,
) -> None:
    """Delegations in a row through the API reach remote_risk over one kept-alive
    connection: the serving coordinator keeps one client, not one per delegation. The
    first handoff to a skill is followed on its stream (httpx's pool); once the skill has
    answered at once, each is one blocking send on the client's small keep-alive pool,
    so the second and later delegations share one connection."""
    watched: list[PeerPorts] = []

    def watch(app: FastAPI) -> PeerPorts:
        watched.append(PeerPorts(app))
        return watched[-1]

    with deployed(DataDir(tmp_path / "data"), wrap_risk=watch) as deployment:
        assert deployment.register().status_code == 200
        # registration's own call (GetExtendedAgentCard) is not one of the delegations
        registering = len(watched[0].ports)
        for _ in range(3):
            answer = deployment.delegate(wait=True, timeout=30.0)
            assert answer.json()["local_state"] == "ACCEPTED", answer.text
    ports = watched[0].ports[registering:]
    assert len(ports) == 3 and len(set(ports[1:])) == 1, ports


@pytest.mark.parametrize("since", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_since_beyond_the_calendar_is_a_typed_refusal(
    deployment: Deployment,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    since: str,
) -> None:
    """A time that parses but leaves datetime's range once moved to UTC: 422 ``bad_since``
    from the API (was a 500, OverflowError), and one line, exit 2, from the CLI, local or
    through --server."""
    answer = deployment.http.get("/v1/runs", params={"since": since})
    assert answer.status_code == 422 and answer.json()["error"]["reason"] == "bad_since"
    monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN", TOKEN)
    for where in (["--data-dir", str(deployment.data)], ["--server", deployment.api]):
        assert main([*where, "runs", "--since", since]) == 2
        err = capsys.readouterr().err
        assert err.startswith("federation: error: bad_since: ") and err.count("\n") == 1, err
