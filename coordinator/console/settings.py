"""How the console is configured, from ``FEDERATION_*`` variables.

* ``FEDERATION_TRACE_URL_TEMPLATE``: where a run's trace id links to, an http(s) URL
  with ``{trace_id}`` in it (say ``http://127.0.0.1:16686/trace/{trace_id}`` for Jaeger);
  unset, the trace id is shown without a link.
* ``FEDERATION_CONSOLE_SESSION_SECONDS`` (default 8 hours) and
  ``FEDERATION_CONSOLE_IDLE_SECONDS`` (default 30 minutes): a session's absolute lifetime
  and how long it lasts unused.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from coordinator.console.sessions import DEFAULT_IDLE_SECONDS, DEFAULT_LIFETIME_SECONDS
from coordinator.errors import ConfigurationError, describe_validation

TRACE_ID = re.compile(r"[0-9a-f]{32}")
PLACEHOLDER = "{trace_id}"


class ConsoleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FEDERATION_", extra="ignore")

    trace_url_template: str | None = None
    console_session_seconds: float = Field(default=DEFAULT_LIFETIME_SECONDS, gt=0, le=7 * 86400)
    console_idle_seconds: float = Field(default=DEFAULT_IDLE_SECONDS, gt=0, le=7 * 86400)

    @field_validator("trace_url_template")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if value.count(PLACEHOLDER) != 1 or urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("must be an http(s) URL with {trace_id} in it once")
        return value

    def trace_url(self, trace_id: object) -> str | None:
        """The tracing UI's page of ``trace_id``; None unconfigured or for a malformed id."""
        if self.trace_url_template is None or not isinstance(trace_id, str):
            return None
        if TRACE_ID.fullmatch(trace_id) is None:
            return None
        return self.trace_url_template.replace(PLACEHOLDER, quote(trace_id, safe=""))


def load_console_settings() -> ConsoleSettings:
    try:
        return ConsoleSettings()
    except ValidationError as exc:
        raise ConfigurationError(f"console settings: {describe_validation(exc)}") from None
