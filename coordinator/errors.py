"""Every error the coordinator raises, and the one place foreign exceptions are translated.

::

    FederationError                 reason: a stable code, message: one readable line
    ├── UsageError                  bad input: an argument, a file, a request document
    │   └── ConfigurationError      a service's settings cannot be used
    ├── UnauditedRun                a run without a ledger behind it (never allowed)
    ├── DataDirError                the data directory cannot be used
    ├── StorageError                the database cannot be opened, migrated or written
    │     reasons: bad_database_url, storage_unavailable, migration_failed
    ├── LedgerError                 the audit ledger refused an event, a head or a bundle
    │     reasons: chain_conflict, event_invalid, head_invalid, bundle_invalid,
    │              untrusted_key, receipt_invalid, truncated, ledger_broken
    ├── IdentityError               the coordinator's signing keys cannot be loaded
    ├── GrantRefused                minting would widen the run's authority (widens_*)
    ├── AdmissionDenied             a proposal failed an admission predicate
    ├── ProjectionError             the context a specialist may see cannot be projected
    ├── StaleRevision               a change based on an outdated handoff version
    ├── RunCancelled                the run was cancelled under the caller
    ├── OwnershipError              a caller that does not own the run tried to act on it
    ├── BudgetExceeded              a run-wide limit would be exceeded
    ├── RegistryError               a card could not be fetched, parsed or accepted
    ├── AuditCredentialError        no usable audit credential for an agent's audit routes
    │     reasons: audit_credential_missing, audit_credential_origin_changed,
    │              audit_credential_invalid
    ├── TransportError              the remote could not be reached or answered badly on HTTP
    ├── ProtocolError               the remote answered something that is not A2A v1.0
    │   └── ArtifactTooLarge        a streamed artifact grew past its limit
    ├── RemoteA2AError              the remote answered a JSON-RPC error (code, ErrorInfo reason;
    │                               a token refusal by its code, e.g. kid_unknown)
    ├── PushRefused                 a push notification we refuse (its HTTP status)
    ├── ServerRefused               the coordinator's API answered an error (``--server``)
    ├── HandoffMovedOn              a handoff's ending lost to one another process committed
    ├── RunEnded                    a cancel of a run with no live branch (reason run_ended)
    ├── LeftToRecovery              a second Ctrl-C: the run is left as it stands
    ├── StillOnServer               a Ctrl-C while a server drives the delegation
    └── ModelError                  a model role got no usable reply (assessment.model_gateway)
        ├── ModelConfigError            model_config_invalid
        ├── LimitReached                limit_reached (request budget, rounds, run deadline)
        ├── ModelIncomplete             model_incomplete (empty, truncated, abnormal end)
        ├── ModelRefused                model_refused
        ├── ModelTimeout                model_timeout (the request's total deadline passed)
        ├── ModelUnavailable            model_unavailable (no connection, HTTP error)
        ├── ModelReplyMalformed         model_reply_malformed (not JSON, not a completion)
        └── ModelReplyTooLarge          model_reply_too_large (over the byte cap, decoded)

httpx, pydantic and JSON decoding errors are turned into these by :func:`translated`, so
nothing above this module needs to know which library failed; the shared layer's errors
(:mod:`agent_cards.errors`) by :func:`from_shared`, keeping their reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from agent_cards.errors import ModelFailure, SharedError, StorageFailure, translated_by
from contracts.a2a_errors import (
    BY_CODE,
    INTERNAL_ERROR,
    PROJECT_KINDS,
    RETRY_AFTER_METADATA,
    A2AErrorKind,
)
from contracts.refusals import REFUSAL_CODES
from contracts.strict_json import StrictJSONError

if TYPE_CHECKING:  # the libraries are loaded by the code that calls them (start-up time)
    import pydantic

# A remote's code for its InternalError is recorded (after the name) only if it looks like
# one: it is the remote's text.
_REFUSAL_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
# The longest wait a remote may ask for that is kept as asked (longer is cut to this).
MAX_RETRY_AFTER_SECONDS = 3600


class FederationError(Exception):
    """Base of every coordinator error: ``reason`` is stable, ``str(error)`` is for people."""

    default_reason = "federation_error"

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or self.default_reason


class RegistryError(FederationError):
    default_reason = "card_invalid"


class AuditCredentialError(FederationError):
    """No audit credential the operator registered for this agent (at its origin)."""

    default_reason = "audit_credential_missing"


class TransportError(FederationError):
    default_reason = "transport_error"


class ProtocolError(FederationError):
    default_reason = "protocol_error"


class OwnershipError(FederationError):
    default_reason = "not_owner"


class BudgetExceeded(FederationError):
    default_reason = "budget_exhausted"


class UsageError(FederationError):
    default_reason = "usage_error"


class UnauditedRun(FederationError):
    """A run was to be built without a ledger behind its audit trail: refused, always."""

    default_reason = "run_unaudited"


class RemoteA2AError(FederationError):
    """A JSON-RPC error answered by a remote agent (on whichever binding).

    ``reason`` is the A2A error's name, or for a refusal of our delegation token the
    refusal's stable code from the ErrorInfo metadata (``kid_unknown``, ``token_expired``)
    when it is one of the protocol's (:data:`contracts.refusals.REFUSAL_CODES`: a remote
    cannot state one of our own reasons; what it stated otherwise is in the message),
    or for an InternalError the stable code the remote gave for it after the name, if any
    (``InternalError:storage_unavailable``: never one of our own reasons);
    ``retry_after`` is the wait in seconds the remote asked for before the same request,
    when it said (``retryAfterSeconds``), at most :data:`MAX_RETRY_AFTER_SECONDS`."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.code = code
        self.kind: A2AErrorKind | None = BY_CODE.get(code)
        self.error_info_reason = reason
        metadata = metadata or {}
        stated = metadata.get("reason", "")
        refusing = self.kind in PROJECT_KINDS
        self.refusal = stated if refusing and stated in REFUSAL_CODES else None
        self.retry_after = _asked_wait(metadata.get(RETRY_AFTER_METADATA, ""))
        name = self.kind.name if self.kind else "UnknownError"
        reason = self.refusal or name
        if self.kind is INTERNAL_ERROR and _REFUSAL_CODE.fullmatch(stated):
            reason = f"{name}:{stated}"
        said = f"remote answered {name} ({code})"
        if refusing and self.refusal is None and stated:
            said += f" stating {_shown(stated)}, which is no refusal code of the protocol"
        super().__init__(f"{said}: {message}", reason)


def _asked_wait(asked: str) -> float | None:
    """``retryAfterSeconds`` as seconds (at most MAX_RETRY_AFTER_SECONDS), if readable."""
    if not (asked.isascii() and asked.isdigit() and len(asked) < 7):
        return None
    return float(min(int(asked), MAX_RETRY_AFTER_SECONDS))


def _shown(stated: str) -> str:
    """A remote's text quoted for a message, when it is short, printable ASCII."""
    readable = stated.isascii() and stated.isprintable() and len(stated) <= 64
    return repr(stated) if readable else "an unreadable reason"


class RunCancelled(FederationError):
    default_reason = "run_cancelled"


class StaleRevision(FederationError):
    """A change based on a version of the handoff that is no longer current."""

    default_reason = "stale_revision"


class AdmissionDenied(FederationError):
    """A handoff failed admission; ``reason`` is the predicate that failed."""

    default_reason = "admission_denied"


class ProjectionError(FederationError):
    default_reason = "projection_refused"


class GrantRefused(FederationError):
    """Minting would widen the run's authority; ``dimension`` names where."""

    default_reason = "grant_refused"

    def __init__(self, dimension: str, message: str) -> None:
        super().__init__(
            f"delegation refused, it would widen {dimension}: {message}",
            f"widens_{dimension.replace('.', '_')}",
        )
        self.dimension = dimension


class DataDirError(FederationError):
    default_reason = "data_dir_unusable"


class ArtifactTooLarge(ProtocolError):
    default_reason = "artifact_too_large"


class PushRefused(FederationError):
    """A push notification we refuse; ``status`` is the HTTP status we answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason, reason)
        self.status = status


class ServerRefused(FederationError):
    """The coordinator answered with an error document; ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message, reason)
        self.status = status


class ConfigurationError(UsageError):
    default_reason = "configuration_invalid"


class IdentityError(FederationError):
    default_reason = "keys_unusable"


class LedgerError(FederationError):
    default_reason = "ledger_error"


class StorageError(FederationError):
    default_reason = "storage_unavailable"


class ModelError(FederationError):
    default_reason = "model_error"


class ModelConfigError(ModelError):
    default_reason = "model_config_invalid"


class LimitReached(ModelError):
    default_reason = "limit_reached"


class ModelIncomplete(ModelError):
    default_reason = "model_incomplete"


class ModelRefused(ModelError):
    default_reason = "model_refused"


class ModelTimeout(ModelError):
    default_reason = "model_timeout"


class ModelUnavailable(ModelError):
    default_reason = "model_unavailable"


class ModelReplyMalformed(ModelError):
    default_reason = "model_reply_malformed"


class ModelReplyTooLarge(ModelError):
    default_reason = "model_reply_too_large"


def describe_validation(error: pydantic.ValidationError) -> str:
    """The first problem of a validation error, as ``where: what``."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "document"
    return f"{where}: {first['msg']}"


def from_shared(error: SharedError) -> FederationError:
    """The coordinator's error for one the shared layer raised, with the same reason."""
    kinds = [k for k in _SHARED_KINDS if k.default_reason == error.reason]
    if kinds:
        return kinds[0](error.message)
    if isinstance(error, StorageFailure):
        return StorageError(error.message, error.reason)
    if isinstance(error, ModelFailure):
        return ModelError(error.message, error.reason)
    return FederationError(error.message, error.reason)


def shared_translated() -> AbstractContextManager[None]:
    """Raise the coordinator's error for any the shared layer raises inside."""
    return translated_by(from_shared)


# httpx's exceptions by name (httpx is imported only where they are checked), first match.
TRANSPORT_FAILURES = (
    ("TimeoutException", "timed out", "timeout"),
    ("ConnectError", "cannot connect", "unreachable"),
    ("UnsupportedProtocol", "not an http(s) URL", "bad_url"),
    ("InvalidURL", "invalid URL", "bad_url"),
)


@contextmanager
def translated(what: str, url: str | None = None) -> Iterator[None]:
    """Translate foreign exceptions raised while doing ``what`` into our hierarchy."""
    try:
        yield
    except Exception as exc:
        ours = foreign(exc, f"{what} {url}" if url else what)
        if ours is None:
            raise
        raise ours from None


def foreign(exc: Exception, what: str) -> FederationError | None:
    """Ours for an httpx, pydantic or strict JSON error, else None (the caller re-raises).
    httpx and pydantic are imported here, not at the top: code that raised one of theirs
    has loaded them already, and a command that uses neither does not pay for them."""
    if isinstance(exc, StrictJSONError):
        return ProtocolError(f"{what}: {exc}", exc.reason)
    import httpx

    for name, said, reason in TRANSPORT_FAILURES:
        if isinstance(exc, getattr(httpx, name)):
            return TransportError(f"{what}: {said}", reason)
    if isinstance(exc, httpx.HTTPError):
        return TransportError(f"{what}: {type(exc).__name__}", "transport_error")
    import pydantic

    if isinstance(exc, pydantic.ValidationError):
        return ProtocolError(f"{what}: {describe_validation(exc)}", "invalid_shape")
    return None


class HandoffMovedOn(FederationError):
    """A handoff ended in this process after another process (a cancel) had ended it."""

    default_reason = "handoff_moved_on"


class RunEnded(FederationError):
    """The run has nothing left to cancel: every branch ended without being cancelled."""

    default_reason = "run_ended"


class LeftToRecovery(FederationError):
    """A second Ctrl-C on a delegation: the run is left as it stands; the message names
    the one command that finishes cancelling it."""

    default_reason = "interrupted"

    def __init__(self, run_id: str | None) -> None:
        where = f"run {run_id}" if run_id else "the run"
        finish = f"federation cancel {run_id}" if run_id else "federation recover"
        super().__init__(f"{where} is left to recovery; to finish cancelling it: {finish}")


class StillOnServer(FederationError):
    """A Ctrl-C while a coordinator's server drives the delegation: only the wait stops."""

    default_reason = "interrupted"

    def __init__(self) -> None:
        super().__init__(
            "stopped waiting; the server still drives the run: find it with "
            "`federation runs --state live` and stop it with `federation cancel RUN_ID`"
        )


# The coordinator's errors for the shared layer's reasons (see from_shared).
_SHARED_KINDS: tuple[type[FederationError], ...] = (
    ModelConfigError,
    ModelIncomplete,
    ModelRefused,
    ModelTimeout,
    ModelUnavailable,
    ModelReplyMalformed,
    ModelReplyTooLarge,
)
