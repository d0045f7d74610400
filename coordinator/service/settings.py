"""How a coordinator process and a CLI talking to one are configured from the environment.

Every variable starts with ``FEDERATION_``; flags on the command line override them.

* Serving (``federation serve coordinator``, :class:`CoordinatorSettings`):
  ``FEDERATION_DATA_DIR``, ``FEDERATION_DATABASE_URL``, ``FEDERATION_ISSUER``,
  ``FEDERATION_HOST``, ``FEDERATION_PORT``, ``FEDERATION_WORKER_LEASE_SECONDS`` and the
  operator credential: ``FEDERATION_OPERATOR_TOKEN`` or ``FEDERATION_OPERATOR_TOKEN_FILE``.
* Minting (every process that mints delegation tokens): ``FEDERATION_STATUS_URL``, the
  public URL under which tokens name their status list
  (:mod:`coordinator.authority.revocation`).
* Calling a running coordinator (``--server``): ``FEDERATION_SERVER`` and the same
  operator credential variables, read by :mod:`coordinator.authority.operator_credential`
  (the token's rules, for both sides, with no settings framework: the CLI starts quickly).

The operator token is a bearer secret: it is never part of a repr, an error or a log line.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from coordinator.authority import operator_credential
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.operator_credential import ENV_PREFIX
from coordinator.errors import ConfigurationError, describe_validation


class CoordinatorSettings(BaseSettings):
    """What ``federation serve coordinator`` runs with."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    operator_token: SecretStr | None = None
    operator_token_file: Path | None = None
    data_dir: Path | None = None
    database_url: str | None = Field(default=None, repr=False)
    issuer: str = DEFAULT_ISSUER
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    worker_lease_seconds: float = Field(default=10.0, gt=0, le=3600)

    def token(self) -> str | None:
        """The token in force, checked; None when neither variable nor flag gives one."""
        given = None if self.operator_token is None else self.operator_token.get_secret_value()
        return operator_credential.operator_token(given, self.operator_token_file)

    def required_token(self, purpose: str) -> str:
        return operator_credential.required(self.token(), purpose, "--operator-token-file")


def load_coordinator_settings(**overrides: object) -> CoordinatorSettings:
    """Settings from the environment, with the given non-None values (flags) on top."""
    given = {name: value for name, value in overrides.items() if value is not None}
    try:
        return CoordinatorSettings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigurationError(f"coordinator settings: {describe_validation(exc)}") from None
