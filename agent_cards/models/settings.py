"""Where a model service is and how each request to it is bounded, chosen by environment.

A service reads ``{prefix}_BASE_URL``, ``{prefix}`` (the model id), ``{prefix}_API_KEY``
and, optionally, one variable per bound (``{prefix}_TIMEOUT_SECONDS``,
``{prefix}_MAX_OUTPUT_TOKENS``, ``{prefix}_MAX_REPLY_BYTES``, and what a subclass adds
to :attr:`ModelSettings.ENV_BOUNDS`); never code. None of it set means no model; some
of it set is an error. The key is held only by the client: it is in no repr, record or
error message, and :meth:`ModelSettings.describe` gives the URL without credentials.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

from agent_cards.errors import MODEL_CONFIG_INVALID, ModelFailure

__all__ = ["ModelSettings", "public_url"]

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_OUTPUT_TOKENS = 600
DEFAULT_MAX_REPLY_BYTES = 1_000_000
S = TypeVar("S", bound="ModelSettings")


def invalid(message: str) -> ModelFailure:
    return ModelFailure(MODEL_CONFIG_INVALID, message)


@dataclass(frozen=True)
class ModelSettings:
    """Where the model service is and how each request to it is bounded."""

    # The numeric fields read from ``{prefix}_{FIELD}`` (upper case), typed as their default.
    ENV_BOUNDS: ClassVar[tuple[str, ...]] = (
        "timeout_seconds",
        "max_output_tokens",
        "max_reply_bytes",
    )

    base_url: str
    model: str
    api_key: str = field(repr=False)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise invalid("the model base URL must be an http(s) URL")
        if not self.model.strip() or not self.api_key.strip():
            raise invalid("the model id and the API key must not be empty")
        if not self.timeout_seconds > 0 or self.max_output_tokens < 1 or self.max_reply_bytes < 1:
            raise invalid("the deadline, the output limit and the reply cap must be positive")

    @classmethod
    def read_env(cls: type[S], prefix: str, environ: Mapping[str, str] | None = None) -> S | None:
        """The settings under ``prefix``, or ``None`` when none of it is set."""
        env = os.environ if environ is None else environ
        names = (f"{prefix}_BASE_URL", prefix, f"{prefix}_API_KEY")
        values = [env.get(name, "").strip() for name in names]
        if not any(values):
            return None
        missing = [name for name, value in zip(names, values, strict=True) if not value]
        if missing:
            raise invalid(f"model configuration incomplete: {', '.join(missing)} unset")
        defaults = {f.name: f.default for f in fields(cls)}
        bounds = {
            name: _number(env, f"{prefix}_{name.upper()}", defaults[name])
            for name in cls.ENV_BOUNDS
        }
        base_url, model, api_key = values
        return cls(base_url, model, api_key, **bounds)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.public_url!r})"

    @property
    def public_url(self) -> str:
        return public_url(self.base_url)

    def describe(self) -> dict[str, Any]:
        """What a record may say about these settings (never the key, nor credentials or a
        query in the URL)."""
        return {
            "model": self.model,
            "base_url": self.public_url,
            "timeout_seconds": self.timeout_seconds,
            "max_output_tokens": self.max_output_tokens,
            "max_reply_bytes": self.max_reply_bytes,
        }


def public_url(url: str) -> str:
    """``url`` without userinfo, query or fragment: what may be printed or recorded."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host, query="", fragment="").geturl()


def _number(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return type(default)(raw)
    except ValueError:
        raise invalid(f"{name} must be a number") from None
