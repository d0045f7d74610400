"""The shared layer raises its own errors; each service answers with its own, same reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cards.errors import ModelFailure as SharedModelFailure
from agent_cards.errors import StorageFailure
from agent_cards.models.settings import ModelSettings
from agent_cards.storage.engine import Database
from coordinator.assessment.model_gateway import ModelConfig
from coordinator.errors import ModelConfigError, StorageError
from coordinator.storage.engine import open_engine
from member_kit.errors import ModelConfigInvalid, StorageUnavailable
from member_kit.storage.engine import open_engine as kit_engine
from remote_risk.risk.model import ModelConfig as RiskModelConfig

INCOMPLETE = {"P_BASE_URL": "http://127.0.0.1:9"}


def test_the_shared_layer_raises_its_own_errors(tmp_path: Path) -> None:
    with pytest.raises(StorageFailure) as refused:
        Database("x.db").open("nope://somewhere")
    assert refused.value.reason == "bad_database_url"
    with pytest.raises(SharedModelFailure) as invalid:
        ModelSettings.read_env("P", INCOMPLETE)
    assert invalid.value.reason == "model_config_invalid"
    assert "P, P_API_KEY" in invalid.value.message


def test_the_coordinator_answers_with_its_errors(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as refused:
        open_engine("nope://somewhere")
    assert refused.value.reason == "bad_database_url"
    with pytest.raises(ModelConfigError) as invalid:
        ModelConfig.from_env("P", INCOMPLETE)
    assert invalid.value.reason == "model_config_invalid"
    with pytest.raises(ModelConfigError):
        ModelConfig("ftp://x", "m", "k")


def test_the_kit_answers_with_its_errors(tmp_path: Path) -> None:
    with pytest.raises(StorageUnavailable):
        kit_engine("nope://somewhere")
    with pytest.raises(ModelConfigInvalid):
        RiskModelConfig.from_env(INCOMPLETE, "P")
    with pytest.raises(ModelConfigInvalid):
        RiskModelConfig("http://127.0.0.1:9", "m", "k", requests_per_task=0)


def test_each_service_keeps_its_own_bounds() -> None:
    env = {"P_BASE_URL": "http://u:pw@127.0.0.1:9/v1?x=1", "P": "m", "P_API_KEY": "secret"}
    risk = RiskModelConfig.from_env({**env, "P_REQUESTS_PER_TASK": "2"}, "P")
    ours = ModelConfig.from_env("P", env)
    assert risk is not None and ours is not None
    assert (risk.timeout_seconds, risk.requests_per_task) == (20.0, 2)
    assert ours.timeout_seconds == 30.0
    assert "secret" not in repr(ours) and "pw" not in repr(risk)
    assert ours.describe()["base_url"] == "http://127.0.0.1:9/v1"
    assert risk.describe()["requests_per_task"] == 2
