"""The errors of what both services share, drawn as one tree; each service translates them.

::

    SharedError                 reason: a stable code, message: one readable line
    ├── EdgeError               the HTTP edge's limits and bodies (agent_cards.edge.errors)
    ├── StorageFailure          the database cannot be opened or migrated
    │     reasons: bad_database_url, storage_unavailable, migration_failed
    └── ModelFailure            a model is misconfigured or gave no usable reply
          reasons: model_config_invalid, model_unavailable, model_timeout,
                   model_reply_malformed, model_reply_too_large

The shared layer raises only these (and, for the parts older than this tree, the errors
beside them: :class:`agent_cards.jwk.KeyMaterialError` for keys,
:class:`agent_cards.transparency.statements.StatementInvalid` for signed statements).
Each service turns a :class:`SharedError` into its own at its boundary
(``coordinator.errors``, ``member_kit.errors``), so nothing above that boundary sees
an error it did not name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = [
    "BAD_DATABASE_URL",
    "MIGRATION_FAILED",
    "MODEL_CONFIG_INVALID",
    "STORAGE_UNAVAILABLE",
    "ModelFailure",
    "SharedError",
    "StorageFailure",
    "translated_by",
]

BAD_DATABASE_URL = "bad_database_url"
STORAGE_UNAVAILABLE = "storage_unavailable"
MIGRATION_FAILED = "migration_failed"
MODEL_CONFIG_INVALID = "model_config_invalid"


class SharedError(Exception):
    """Base of every deliberate error of the shared layer."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class StorageFailure(SharedError):
    """The database cannot be opened or migrated (``reason`` says which)."""


class ModelFailure(SharedError):
    """A model's configuration cannot be used, or its request gave no usable reply."""


@contextmanager
def translated_by(convert: Callable[[SharedError], Exception]) -> Iterator[None]:
    """Raise ``convert(error)`` (a service's own error) for any :class:`SharedError`
    raised inside, caused by what caused it."""
    try:
        yield
    except SharedError as exc:
        raise convert(exc) from exc.__cause__
