"""A hung risk model under a short lease ends as a model failure, before the lease does.

A real coordinator hands off to a real remote_risk whose model (the adversarial server)
never answers. The remote's model deadline is derived from the delegation token's ``exp``
(the lease plus leeway, minus the remote's margin), so the task ends FAILED with
``model_timeout`` and the handoff says so, instead of ``lease_expired -> needs_input``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.handoff import HandoffState
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.dispatch.attempt.driver import RemoteOutcome
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.adversarial_model import AdversarialModel, adversarial_model, hung
from tests.coordinator.test_leases_and_cancel import (
    COORDINATOR_KEYS,
    REMOTE_KEYS,
    one_handoff,
    registered,
)
from tests.runs import new_run
from tests.servers import free_port, running

LEASE_SECONDS = 10.0


@pytest.fixture
def hung_model() -> Iterator[AdversarialModel]:
    with adversarial_model([hung(60)]) as model:
        yield model


@pytest.fixture
def risk_with_hung_model(hung_model: AdversarialModel) -> Iterator[str]:
    """remote_risk whose model deadline (20 s) is longer than the coordinator's lease."""
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={DEFAULT_ISSUER: COORDINATOR_KEYS.trusted_keys()},
        signing_keys=REMOTE_KEYS,
        model=hung_model.risk_config(20.0),
    )
    with running(create_app(settings), port=port) as url:
        yield url


def test_hung_model_is_a_model_failure_before_the_lease(
    risk_with_hung_model: str, hung_model: AdversarialModel, tmp_path: Path
) -> None:
    async def go() -> RemoteOutcome:
        async with A2AClient() as client:
            agent = await registered(client, risk_with_hung_model, DataDir(tmp_path))
            return await one_handoff(client, agent, new_run(), LEASE_SECONDS)

    started = time.monotonic()
    outcome = asyncio.run(go())
    elapsed = time.monotonic() - started
    assert outcome.record.state is HandoffState.FAILED, outcome.record.reason
    assert outcome.finding is not None and outcome.finding.error_code == "model_timeout"
    assert outcome.record.reason == "remote_failed:model_timeout"
    assert len(hung_model.requests) == 1
    assert elapsed < LEASE_SECONDS
