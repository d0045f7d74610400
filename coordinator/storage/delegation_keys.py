"""Submissions by ``Idempotency-Key``: the run a key created, found again by a retry.

``POST /v1/delegations`` with ``"wait": false`` may carry an ``Idempotency-Key`` header
(the IETF HTTP APIs working group's draft). The key's row is written in the one
transaction that creates the run, so the two are stored together or not at all. A client
that got no answer, or a 503 for a commit whose outcome the server could not know (the
answer to its COMMIT lost), sends the same request under the same key and is answered
the run that the first one created, never a second run. The same key with another
request is refused (``idempotency_key_reused``). A key is kept :data:`KEPT_SECONDS`.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine

from contracts.canonical import canonical_json
from coordinator.errors import UsageError
from coordinator.storage import driver
from coordinator.storage.run_rows import Step
from coordinator.storage.runs import RunStore
from coordinator.storage.schema import delegation_keys

T = TypeVar("T")
# Given a run's id and its handoff's attempt id, the write of the key for that run.
Keep = Callable[[str, str], Step]

KEPT_SECONDS = 24 * 3600
KEY_HELP = (
    "a submission (wait false) is stored once per key: the same request sent again under "
    "it is answered the run it created (kept a day); another request under it is refused"
)
# What a key may be: a token of visible ASCII (a UUID, say), as sent or as a quoted
# Structured Field string.
_KEY = re.compile(r'"?([A-Za-z0-9._:~+/=-]{1,255})"?')
_FIND_SQL = (
    f"SELECT run_id, attempt_id, request_digest FROM {delegation_keys.name} "
    "WHERE idempotency_key = :key AND created_at >= :since"
)
_PURGE_SQL = f"DELETE FROM {delegation_keys.name} WHERE created_at < :since"
_INSERT_SQL = driver.insert_sql(delegation_keys.name, (c.name for c in delegation_keys.columns))


@dataclass(frozen=True)
class SubmissionKey:
    """An ``Idempotency-Key`` and the digest of the request it came with."""

    value: str
    request_digest: str

    @classmethod
    def of(cls, header: str, request: dict[str, Any]) -> SubmissionKey:
        """The key of ``header`` for ``request`` (its JSON), or ``idempotency_key_invalid``."""
        found = _KEY.fullmatch(header.strip())
        if found is None:
            raise UsageError(
                "Idempotency-Key must be 1 to 255 characters of A-Z a-z 0-9 . _ : ~ + / = -",
                "idempotency_key_invalid",
            )
        digest = "sha256:" + hashlib.sha256(canonical_json(request)).hexdigest()
        return cls(found.group(1), digest)


@dataclass(frozen=True)
class KeyedRun:
    """What a key's first request created."""

    run_id: str
    attempt_id: str

    def view(self, store: RunStore) -> dict[str, str]:
        """Its run, its attempt and the handoff's state now."""
        found = store.handoff(self.attempt_id)
        state = found[0].state.value if found is not None else "unknown"
        return {"run_id": self.run_id, "attempt_id": self.attempt_id, "state": state}


def once(
    engine: Engine,
    key: SubmissionKey | None,
    submit: Callable[[Keep | None], T],
    earlier: Callable[[KeyedRun], T],
) -> T:
    """``submit`` (given the write of ``key`` for its run's transaction), unless ``key``
    created a run already: then ``earlier`` of that run. If ``submit`` fails and the key
    is then found (a concurrent request under it won, or this very transaction committed
    although its answer was lost), that run is the answer too."""
    if key is None:
        return submit(None)
    found = find(engine, key)
    if found is not None:
        return earlier(found)
    try:
        return submit(lambda run_id, attempt_id: remembered(key, run_id, attempt_id))
    except Exception:
        found = find(engine, key)
        if found is None:
            raise
    return earlier(found)


def find(engine: Engine, key: SubmissionKey) -> KeyedRun | None:
    """The run ``key`` created, if it is kept; ``idempotency_key_reused`` if it came with
    another request."""
    params = {"key": key.value, "since": int(time.time()) - KEPT_SECONDS}
    row = driver.read_row(engine, _FIND_SQL, params)
    if row is None:
        return None
    run_id, attempt_id, digest = row
    if digest != key.request_digest:
        raise UsageError(
            "this Idempotency-Key was sent with another request", "idempotency_key_reused"
        )
    return KeyedRun(str(run_id), str(attempt_id))


def remembered(key: SubmissionKey, run_id: str, attempt_id: str) -> Step:
    """The write of ``key`` for its run (with the keys past their day gone), for the run's
    own transaction."""
    now = int(time.time())
    row = {
        "idempotency_key": key.value,
        "request_digest": key.request_digest,
        "run_id": run_id,
        "attempt_id": attempt_id,
        "created_at": now,
    }

    def write(connection: Connection) -> None:
        driver.execute(connection, _PURGE_SQL, {"since": now - KEPT_SECONDS})
        driver.execute(connection, _INSERT_SQL, row)

    return write
