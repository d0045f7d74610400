"""A member's logging set-up: :mod:`agent_cards.telemetry.logs` (shared by both services,
importing neither) under the member's environment prefix, ``<PREFIX>LOG_LEVEL`` and
``<PREFIX>LOG_FORMAT`` (:func:`member_logs`). The module's own ``add_arguments`` and
``setup_from`` are remote_risk's: ``REMOTE_RISK_LOG_LEVEL`` and ``REMOTE_RISK_LOG_FORMAT``."""

from __future__ import annotations

from agent_cards.telemetry.logs import ServiceLogs, add_secret, adopt_uvicorn, reset, setup
from member_kit.telemetry.names import REMOTE_RISK, TelemetryNames

__all__ = [
    "ENV_PREFIX",
    "add_arguments",
    "add_secret",
    "adopt_uvicorn",
    "member_logs",
    "reset",
    "setup",
    "setup_from",
]


def member_logs(names: TelemetryNames) -> ServiceLogs:
    """The logging set-up of the member ``names`` name (its variables' prefix)."""
    return ServiceLogs(names.env_prefix)


ENV_PREFIX = REMOTE_RISK.env_prefix
_LOGS = member_logs(REMOTE_RISK)
add_arguments = _LOGS.add_arguments
setup_from = _LOGS.setup_from
