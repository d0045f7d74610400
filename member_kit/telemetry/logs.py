"""This service's logging set-up: :mod:`agent_cards.telemetry.logs` (shared by both
services, importing neither) with its own environment prefix, ``REMOTE_RISK_LOG_LEVEL`` and
``REMOTE_RISK_LOG_FORMAT``."""

from __future__ import annotations

from agent_cards.telemetry.logs import ServiceLogs, add_secret, adopt_uvicorn, reset, setup

__all__ = [
    "ENV_PREFIX",
    "add_arguments",
    "add_secret",
    "adopt_uvicorn",
    "reset",
    "setup",
    "setup_from",
]

ENV_PREFIX = "REMOTE_RISK_"
_LOGS = ServiceLogs(ENV_PREFIX)
add_arguments = _LOGS.add_arguments
setup_from = _LOGS.setup_from
