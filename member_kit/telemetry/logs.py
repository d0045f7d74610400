"""This service's logging set-up: :mod:`agent_cards.edge.logs` (shared by both services,
importing neither) with its own environment prefix, ``REMOTE_RISK_LOG_LEVEL`` and
``REMOTE_RISK_LOG_FORMAT``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from agent_cards.edge import logs as shared
from agent_cards.edge.logs import add_secret, adopt_uvicorn, reset, setup

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    shared.add_arguments(parser, ENV_PREFIX)


def setup_from(args: argparse.Namespace, env: Mapping[str, str]) -> None:
    shared.setup_from(args, env, ENV_PREFIX)
