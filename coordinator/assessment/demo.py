"""``federation demo``: the pilot assessment against a real remote_risk process.

The demo starts remote_risk as a separate OS process on a free loopback port, waits for
its card, registers it like any other specialist, runs the chosen cases, and stops the
process it started, whatever happened in between.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agent_cards.keys import KeySet, TrustedKeys, load_or_create
from coordinator.assessment.pilot import RISK_SKILL, PilotResult, run_pilot
from coordinator.authority.identity import coordinator_keys, issuer_id, publish_jwks
from coordinator.errors import FederationError
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace

READY_PREFIX = "remote_risk listening on "
# What a started remote_risk inherits from our environment (see child_environment).
CHILD_ENVIRONMENT = frozenset(
    {
        *("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TEMP", "TMP"),
        *("PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT", "SSL_CERT_FILE", "SSL_CERT_DIR"),
    }
)
CHILD_PREFIX = "REMOTE_RISK_"
RISK_MODEL_PREFIX = "REMOTE_RISK_MODEL"
START_TIMEOUT = 20.0


class ServiceStartError(FederationError):
    default_reason = "service_start_failed"


def child_environment(
    with_risk_model: bool = True, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment the started remote_risk gets: an allow-list, never the whole of ours.

    It is the other team's process: it gets what a Python process needs to start, and the
    ``REMOTE_RISK_*`` settings meant for it (its model settings only ``with_risk_model``).
    The coordinator's own settings (``FEDERATION_*``, its model key) are never passed.
    """
    env = os.environ if environ is None else environ
    allowed = {name: value for name, value in env.items() if name in CHILD_ENVIRONMENT}
    for name, value in env.items():
        if not name.startswith(CHILD_PREFIX):
            continue
        if name.startswith(RISK_MODEL_PREFIX) and not with_risk_model:
            continue
        allowed[name] = value
    return allowed


@contextmanager
def remote_risk_process(
    extra_args: list[str] | None = None, environment: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Start ``remote_risk`` on a free loopback port and yield its base URL; its
    environment is ``environment`` (default :func:`child_environment`)."""
    command = [sys.executable, "-m", "remote_risk", "--host", "127.0.0.1", "--port", "0"]
    process = subprocess.Popen(
        [*command, *(extra_args or [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(child_environment() if environment is None else environment),
    )
    try:
        yield _wait_for_url(process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_url(process: subprocess.Popen[str]) -> str:
    line: list[str] = []
    stdout = process.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT)
    if not line or not line[0].startswith(READY_PREFIX):
        raise ServiceStartError("remote_risk did not report a listening address in time")
    return line[0][len(READY_PREFIX) :].strip()


@dataclass(frozen=True)
class DemoTrust:
    """The trust the demo sets up, as two operators would out of band.

    The coordinator's public keys become remote_risk's trusted issuer, and remote_risk's
    public keys are pinned by the coordinator before its card is fetched.
    """

    coordinator_keys: KeySet
    issuer: str
    remote_args: list[str]
    remote_pins: TrustedKeys


def prepare_trust(data: DataDir) -> DemoTrust:
    keys = coordinator_keys(data)
    issuer = issuer_id()
    remote_dir = data.path("demo", "remote-risk")
    remote_keys = load_or_create(remote_dir / "keys")
    args = ["--data-dir", str(remote_dir), "--trust-issuer", f"{issuer}={publish_jwks(data, keys)}"]
    return DemoTrust(keys, issuer, args, remote_keys.trusted_keys())


async def run_demo(
    data: DataDir,
    base_url: str,
    cases: list[str],
    trust: DemoTrust,
    *,
    parallel: bool = False,
    ws: Workspace,
) -> list[PilotResult]:
    """Register remote_risk like any specialist, then run each case; every run and every
    cross-service fact is written to ``ws`` (the data directory's database)."""
    async with A2AClient() as client:
        registry = Registry(data, ws.trail("operator"), ws.run_store())
        registration = await registry.register(
            client,
            base_url,
            expect_skill=RISK_SKILL,
            anchor=TrustAnchor(keys=trust.remote_pins),
            approve=True,
        )
        results = []
        for case in cases:
            result = await run_pilot(
                case,
                client,
                registration.agent,
                parallel=parallel,
                keys=trust.coordinator_keys,
                issuer=trust.issuer,
                ws=ws,
            )
            result.run.save(result.run.document(case=case))
            results.append(result)
        return results


def demo_document(results: list[PilotResult]) -> dict[str, Any]:
    return {"cases": [result.as_dict() for result in results]}
