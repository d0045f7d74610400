"""The operator's bearer token, and where a CLI sends its ``--server`` commands.

The token comes from ``FEDERATION_OPERATOR_TOKEN`` or a file named by
``FEDERATION_OPERATOR_TOKEN_FILE`` (never both) and is held to one rule here, whichever
side reads it: the coordinator's settings (:mod:`coordinator.service.settings`) and the
CLI calling a running coordinator (:class:`ClientSettings`). This module reads the
environment with the standard library alone, so a ``--server`` command loads no settings
framework. The token is never part of a repr, an error or a log line.
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass, field
from pathlib import Path

from agent_cards.edge.token_strength import GENERATE, weakness
from coordinator.errors import ConfigurationError

ENV_PREFIX = "FEDERATION_"
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "-._~+/=")


def operator_token(token: str | None, token_file: Path | None) -> str | None:
    """The token in force, checked; None when neither variable nor flag gives one."""
    if token_file is not None:
        if token is not None:
            raise ConfigurationError(
                "give the operator token once: FEDERATION_OPERATOR_TOKEN or a token file, not both",
                "operator_token_ambiguous",
            )
        return check_token(read_token_file(token_file))
    if token is not None:
        return check_token(token)
    return None


def required(token: str | None, purpose: str, flag: str | None = None) -> str:
    """``token``, else a one-line error naming where it can be given: the variables,
    and ``flag`` where the command at hand has one (``serve coordinator`` does)."""
    if token is None:
        also = f" (or {flag} FILE)" if flag else ""
        raise ConfigurationError(
            f"{purpose} needs an operator token: set FEDERATION_OPERATOR_TOKEN or "
            f"FEDERATION_OPERATOR_TOKEN_FILE{also}",
            "operator_token_missing",
        )
    return token


def read_token_file(path: Path) -> str:
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) else "not ASCII text"
        raise ConfigurationError(
            f"cannot read the operator token file {path}: {detail}", "operator_token_unreadable"
        ) from None
    return text.strip()


def check_token(token: str) -> str:
    """A token that fits in a header and is long enough to be a secret (never echoed)."""
    problem = weakness(token)
    if problem is not None:
        message = f"the operator token {problem}; {GENERATE}"
        raise ConfigurationError(message, "operator_token_weak")
    if not set(token) <= _TOKEN_CHARS:
        raise ConfigurationError(
            "the operator token may hold letters, digits and -._~+/= only",
            "operator_token_malformed",
        )
    return token


@dataclass(frozen=True)
class ClientSettings:
    """Where ``--server`` sends the CLI's commands (``FEDERATION_SERVER``, a flag on top),
    and with which credential (read, and checked, only when a command is sent)."""

    server: str | None
    _token: str | None = field(default=None, repr=False)
    _token_file: Path | None = None

    def required_token(self, purpose: str) -> str:
        return required(operator_token(self._token, self._token_file), purpose)


def load_client_settings(server: str | None = None) -> ClientSettings:
    """From the environment, variable names matched in any case (as the coordinator's
    own settings match them); ``server`` (the ``--server`` flag), when given, on top."""
    env = {name.upper(): value for name, value in os.environ.items()}
    token_file = env.get(f"{ENV_PREFIX}OPERATOR_TOKEN_FILE")
    return ClientSettings(
        server if server is not None else env.get(f"{ENV_PREFIX}SERVER"),
        env.get(f"{ENV_PREFIX}OPERATOR_TOKEN"),
        Path(token_file) if token_file is not None else None,
    )
