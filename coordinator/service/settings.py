"""How a coordinator process and a CLI talking to one are configured from the environment.

Every variable starts with ``FEDERATION_``; flags on the command line override them.

* Serving (``federation serve coordinator``, :class:`CoordinatorSettings`):
  ``FEDERATION_DATA_DIR``, ``FEDERATION_DATABASE_URL``, ``FEDERATION_ISSUER``,
  ``FEDERATION_HOST``, ``FEDERATION_PORT``, ``FEDERATION_WORKER_LEASE_SECONDS`` and the
  operator credential: ``FEDERATION_OPERATOR_TOKEN`` or ``FEDERATION_OPERATOR_TOKEN_FILE``.
* Calling a running coordinator (``--server``, :class:`ClientSettings`):
  ``FEDERATION_SERVER`` and the same operator credential variables.

The operator token is a bearer secret: it is never part of a repr, an error or a log line.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_cards.edge.token_strength import GENERATE, weakness
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.errors import ConfigurationError, describe_validation

ENV_PREFIX = "FEDERATION_"
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "-._~+/=")


class _OperatorCredential(BaseSettings):
    """The operator token, given directly or as a file holding it."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    operator_token: SecretStr | None = None
    operator_token_file: Path | None = None
    # The flag, if any, that gives the token file where these settings are read.
    TOKEN_FLAG: ClassVar[str] = ""

    def token(self) -> str | None:
        """The token in force, checked; None when neither variable nor flag gives one."""
        if self.operator_token_file is not None:
            if self.operator_token is not None:
                raise ConfigurationError(
                    "give the operator token once: FEDERATION_OPERATOR_TOKEN or a token file, "
                    "not both",
                    "operator_token_ambiguous",
                )
            return check_token(read_token_file(self.operator_token_file))
        if self.operator_token is not None:
            return check_token(self.operator_token.get_secret_value())
        return None

    def required_token(self, purpose: str) -> str:
        token = self.token()
        if token is None:
            flag = f" (or {self.TOKEN_FLAG} FILE)" if self.TOKEN_FLAG else ""
            raise ConfigurationError(
                f"{purpose} needs an operator token: set FEDERATION_OPERATOR_TOKEN or "
                f"FEDERATION_OPERATOR_TOKEN_FILE{flag}",
                "operator_token_missing",
            )
        return token


class CoordinatorSettings(_OperatorCredential):
    """What ``federation serve coordinator`` runs with."""

    TOKEN_FLAG: ClassVar[str] = "--operator-token-file"  # serve coordinator's own

    data_dir: Path | None = None
    database_url: str | None = Field(default=None, repr=False)
    issuer: str = DEFAULT_ISSUER
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    worker_lease_seconds: float = Field(default=10.0, gt=0, le=3600)


class ClientSettings(_OperatorCredential):
    """Where ``--server`` sends the CLI's commands, and with which credential."""

    server: str | None = None


def load_coordinator_settings(**overrides: object) -> CoordinatorSettings:
    """Settings from the environment, with the given non-None values (flags) on top."""
    given = {name: value for name, value in overrides.items() if value is not None}
    try:
        return CoordinatorSettings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigurationError(f"coordinator settings: {describe_validation(exc)}") from None


def load_client_settings(**overrides: object) -> ClientSettings:
    given = {name: value for name, value in overrides.items() if value is not None}
    try:
        return ClientSettings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigurationError(f"client settings: {describe_validation(exc)}") from None


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
