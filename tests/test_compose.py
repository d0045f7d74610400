"""compose.yaml describes a deployment the code accepts (no container engine runs here)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from agent_cards.telemetry.tracing import exporter_names
from coordinator import workspace
from coordinator.authority import identity
from coordinator.cli import parser as cli
from coordinator.service.http.server import build_serve_parser
from coordinator.service.settings import ENV_PREFIX, CoordinatorSettings
from coordinator.storage import datadir
from coordinator.telemetry import logs as coordinator_logs
from member_kit.telemetry import logs as risk_logs
from member_kit.trust import issuers as trust
from remote_risk import __main__ as remote_risk_main

ROOT = Path(__file__).resolve().parent.parent
SERVICES = {"postgres", "coordinator", "remote-risk"}
OTEL_VARIABLES = {"OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER"}
# ${NAME:-default} or ${NAME:?message}, as compose interpolates them
INTERPOLATED = re.compile(r"\$\{(\w+)(?::-([^}]*)|:\?[^}]*)?\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(document, dict)
    return document


def coordinator_variables() -> set[str]:
    """Every FEDERATION_* variable the serving coordinator reads."""
    fields = {ENV_PREFIX + name.upper() for name in CoordinatorSettings.model_fields}
    logging = {f"{coordinator_logs.ENV_PREFIX}LOG_{what}" for what in ("LEVEL", "FORMAT")}
    own = {datadir.ENV_VAR, workspace.DATABASE_ENV, identity.ISSUER_ENV}
    return fields | own | logging | OTEL_VARIABLES


def remote_risk_variables() -> set[str]:
    logging = {f"{risk_logs.ENV_PREFIX}LOG_{what}" for what in ("LEVEL", "FORMAT")}
    own = {trust.TRUST_ENV_VAR, trust.DATA_DIR_ENV_VAR, remote_risk_main.DATABASE_URL_ENV_VAR}
    return own | {remote_risk_main.METRICS_TOKEN_ENV_VAR} | logging | OTEL_VARIABLES


def test_three_services_with_health_checks_and_volumes(compose: dict[str, Any]) -> None:
    """postgres, coordinator and remote-risk each have a health check and a named volume."""
    services = {k: v for k, v in compose["services"].items() if "profiles" not in v}
    assert set(services) == SERVICES
    for name in SERVICES:
        service = services[name]
        assert service["healthcheck"]["test"], name
        [volume] = service["volumes"]
        assert volume.split(":")[0] in compose["volumes"], name
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert "/healthz" in " ".join(services["coordinator"]["healthcheck"]["test"])
    assert "agent-card.json" in " ".join(services["remote-risk"]["healthcheck"]["test"])


def test_start_order_waits_for_health(compose: dict[str, Any]) -> None:
    """The coordinator waits for a healthy database, remote-risk for a healthy coordinator."""
    services = compose["services"]
    assert services["coordinator"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    depends = services["remote-risk"]["depends_on"]["coordinator"]["condition"]
    assert depends == "service_healthy"


def test_coordinator_command_and_environment(compose: dict[str, Any]) -> None:
    """The coordinator's command parses with the real CLI and its variables are ones it reads."""
    service = compose["services"]["coordinator"]
    args = cli.build_parser().parse_args(service["command"])
    assert (args.command, args.service) == ("serve", "coordinator")
    serve = build_serve_parser().parse_args(args.service_args)
    assert (serve.host, serve.port) == ("0.0.0.0", 8080)
    environment = service["environment"]
    assert set(environment) <= coordinator_variables()
    assert environment["FEDERATION_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert "@postgres:5432/" in environment["FEDERATION_DATABASE_URL"]
    secret, audit = service["secrets"]
    assert environment["FEDERATION_OPERATOR_TOKEN_FILE"] == f"/run/secrets/{secret}"
    assert {secret, audit} <= set(compose["secrets"])
    assert audit == AUDIT_SECRET
    data_dir = environment["FEDERATION_DATA_DIR"]
    assert service["volumes"][0].split(":")[1] == data_dir


def test_remote_risk_command_and_environment(compose: dict[str, Any]) -> None:
    """remote-risk's command parses with both parsers and trusts the coordinator's JWKS."""
    service = compose["services"]["remote-risk"]
    args = cli.build_parser().parse_args(service["command"])
    assert (args.command, args.service) == ("serve", "risk")
    risk = remote_risk_main.build_parser().parse_args(args.service_args)
    assert (risk.host, risk.port) == ("0.0.0.0", 8081)
    assert risk.public_base_url == "http://remote-risk:8081"
    assert not risk.insecure_anonymous
    [entry] = risk.trust_issuer
    issuer, source = trust.parse_entry(entry)
    assert issuer == CoordinatorSettings.model_fields["issuer"].default
    assert source == "http://coordinator:8080/.well-known/jwks.json"
    environment = service["environment"]
    assert set(environment) <= remote_risk_variables()
    assert service["volumes"][0].split(":")[1] == environment[trust.DATA_DIR_ENV_VAR]


AUDIT_SECRET = "remote_risk_audit_token"


def _unescaped(text: str) -> str:
    """What compose hands the container for ``text``: ``$$`` is a literal ``$``."""
    return text.replace("$$", "$")


def test_remote_risk_audit_token_comes_from_a_secret(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    """remote-risk gets REMOTE_RISK_AUDIT_TOKEN from the secret its entrypoint reads (so
    `audit reconcile` can ask it), and still runs `federation` with its parsed command.
    The entrypoint is run by sh here, the secret's path moved into a temporary directory
    and `federation` standing for a program that prints the variable."""
    service = compose["services"]["remote-risk"]
    assert service["secrets"] == [AUDIT_SECRET]
    assert compose["secrets"][AUDIT_SECRET]["file"] == f"./secrets/{AUDIT_SECRET}"
    shell, flag, script, name = service["entrypoint"]
    assert (shell, flag, name) == ("/bin/sh", "-c", "federation")
    script = _unescaped(script)
    assert f"/run/secrets/{AUDIT_SECRET}" in script
    (tmp_path / "secret").write_text("a-token-from-the-secret-file\n")
    (tmp_path / "federation").symlink_to("/usr/bin/printenv")
    script = script.replace(f"/run/secrets/{AUDIT_SECRET}", str(tmp_path / "secret"))
    shown = subprocess.run(
        ["sh", "-c", script, name, remote_risk_main.AUDIT_TOKEN_ENV_VAR],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == "a-token-from-the-secret-file\n"
    missing = script.replace(str(tmp_path / "secret"), str(tmp_path / "absent"))
    failed = subprocess.run(
        ["sh", "-c", missing, name, remote_risk_main.AUDIT_TOKEN_ENV_VAR],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert failed.returncode != 0 and not failed.stdout


def test_variables_are_interpolated_not_written_in(compose: dict[str, Any]) -> None:
    """No password or token is written into the file; they come from the environment."""
    text = (ROOT / "compose.yaml").read_text()
    assert "${POSTGRES_PASSWORD:?" in text
    assert not re.search(r"OPERATOR_TOKEN:\s", text)
    postgres = compose["services"]["postgres"]["environment"]
    assert postgres["POSTGRES_PASSWORD"].startswith("${")


def test_image_runs_the_federation_command() -> None:
    """The Dockerfile installs the project, every package of it, within the constraints
    file, and makes `federation` the entry point."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --constraint constraints.txt ." in dockerfile
    assert re.search(r"^COPY .*\bconstraints\.txt\b", dockerfile, re.MULTILINE)
    assert 'ENTRYPOINT ["federation"]' in dockerfile
    assert re.search(r"^USER \S+", dockerfile, re.MULTILINE)
    packages = _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    for package in (pattern.rstrip("*") for pattern in packages):
        assert re.search(rf"^COPY {package} \./{package}$", dockerfile, re.MULTILINE), package


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _applies(requirement: Requirement, extras: set[str]) -> bool:
    marker = requirement.marker
    return marker is None or any(marker.evaluate({"extra": e}) for e in {"", *extras})


def test_every_runtime_dependency_is_pinned() -> None:
    """Each dependency of pyproject.toml, and each of theirs (extras included, by the
    installed distributions' metadata), has one exact version in constraints.txt, and
    that version satisfies what asks for it."""
    pins = _pins()
    pending = [Requirement(d) for d in _pyproject()["project"]["dependencies"]]
    pending = [r for r in pending if _applies(r, set())]
    extras: dict[str, set[str]] = {}
    unpinned, unsatisfied = [], []
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name not in pins:  # said as the line to add, at the version installed here
            unpinned.append(f"{name}=={metadata.version(name)}")
            continue
        if not requirement.specifier.contains(pins[name], prereleases=True):
            unsatisfied.append(f"{requirement} (pinned {pins[name]})")
        wanted = set(requirement.extras)
        if name in extras and wanted <= extras[name]:
            continue
        extras[name] = extras.get(name, set()) | wanted
        needs = [Requirement(r) for r in metadata.requires(name) or []]
        pending.extend(r for r in needs if _applies(r, extras[name]))
    assert not unpinned, sorted(set(unpinned))
    assert not unsatisfied, unsatisfied
    assert "psycopg-binary" in extras and "cryptography" in extras  # extras were followed


def interpolated(value: str, given: dict[str, str]) -> str:
    """``value`` as compose interpolates it with the variables ``given`` (no .env)."""
    return INTERPOLATED.sub(lambda m: given.get(m[1]) or m[2] or "", value)


def test_observability_profile_adds_a_trace_collector(compose: dict[str, Any]) -> None:
    """`--profile observability` adds Jaeger (OTLP on, UI on loopback). Both services name
    themselves and have Jaeger's OTLP/HTTP endpoint written in: with no variable set they
    export nothing, with OTEL_TRACES_EXPORTER=otlp (the one documented switch, no .env
    line) they export to Jaeger, as the code reads those variables."""
    jaeger = compose["services"]["jaeger"]
    assert jaeger["profiles"] == ["observability"]
    assert jaeger["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    assert all(port.startswith("127.0.0.1:") for port in jaeger["ports"])
    for name, service_name in (("coordinator", "coordinator"), ("remote-risk", "remote-risk")):
        environment = compose["services"][name]["environment"]
        assert environment["OTEL_SERVICE_NAME"] == service_name
        assert environment["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"
        plain = {k: interpolated(str(v), {}) for k, v in environment.items()}
        assert exporter_names(plain) == []
        switched = {
            k: interpolated(str(v), {"OTEL_TRACES_EXPORTER": "otlp"})
            for k, v in environment.items()
        }
        assert exporter_names(switched) == ["otlp"]
        assert switched["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"
    text = (ROOT / "compose.yaml").read_text()
    assert "OTEL_TRACES_EXPORTER=otlp docker compose --profile observability up" in text
