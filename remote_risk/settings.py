"""How one risk service is configured: the kit's settings, and the risk model."""

from __future__ import annotations

from dataclasses import dataclass

from member_kit.settings import JSONRPC_PATH, REST_PATH, MemberSettings
from remote_risk.risk.model import ModelConfig

__all__ = ["JSONRPC_PATH", "REST_PATH", "Settings"]


@dataclass(frozen=True)
class Settings(MemberSettings):
    """:class:`~member_kit.settings.MemberSettings`, and, with ``model``, the risk policy
    interpreted by that model and checked against the records
    (:mod:`remote_risk.risk.interpreter`; read it with
    :func:`remote_risk.risk.interpreter.model_config_from_env`)."""

    model: ModelConfig | None = None
