"""The coordinator's own identity: its issuer id and the keys it signs delegations with.

Keys live in the data directory (``keys/``, owner-only permissions) and are created on
first use. The public half is also written to ``jwks.json`` in the data directory, which
is what a remote service's operator pins as this coordinator's trusted issuer; it is
written when the keys change (created, rotated, expired), not each time they are used.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from agent_cards.keys import KeyMaterialError, KeySet, load_or_create
from contracts import strict_json
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.errors import IdentityError
from coordinator.storage.datadir import DataDir

ISSUER_ENV = "FEDERATION_ISSUER"
JWKS_FILE = "jwks.json"
# A new key is published this long before it signs: twice the max-age both services send
# with their JWK Set, so every verifier caching it has fetched the new key by then.
DEFAULT_PUBLISH_SECONDS = 600
# What an operator who activates a key at once is told: what remotes do meanwhile.
AT_ONCE_NOTE = (
    "note: a remote that has not fetched this key yet refuses it (kid_unknown) until it "
    "fetches the JWK Set again; a handoff so refused is sent once more, after the wait the "
    "remote asks for"
)


def issuer_id() -> str:
    return os.environ.get(ISSUER_ENV) or DEFAULT_ISSUER


def coordinator_keys(data: DataDir) -> KeySet:
    """The key set as it is now: a published key whose activation time has passed is the
    active one (computed on every load, so nothing is rewritten by readers), and
    ``jwks.json`` lists what verifies now."""
    data.ensure()  # owner-only, before the keys directory is made inside it
    try:
        keys = load_or_create(data.path("keys")).effective()
    except (KeyMaterialError, OSError) as exc:
        raise IdentityError(f"cannot load the coordinator's signing keys: {exc}") from None
    publish_jwks(data, keys)
    return keys


def publish_jwks(data: DataDir, keys: KeySet) -> Path:
    """Write ``jwks.json`` when what verifies now differs from what it holds (so that
    readers, e.g. concurrent JWK Set requests, do not rewrite the same file)."""
    document = keys.public_jwks()
    path = data.path(JWKS_FILE)
    try:
        unchanged = path.read_bytes() == strict_json.dumps(document)
    except OSError:
        unchanged = False
    if not unchanged:
        data.write_json(document, JWKS_FILE)
    return path


def rotate(data: DataDir, grace_seconds: int, publish_seconds: int | None = 0) -> KeySet:
    """Publish a new key now and make it active after ``publish_seconds`` (0: at once;
    None: only on :func:`activate`); the key it replaces keeps verifying for
    ``grace_seconds`` after that."""
    grace = timedelta(seconds=grace_seconds)
    current = coordinator_keys(data)
    try:
        if publish_seconds == 0:
            keys = current.rotate(grace=grace)
        else:
            delay = None if publish_seconds is None else timedelta(seconds=publish_seconds)
            keys = current.publish(grace=grace, delay=delay)
    except KeyMaterialError as exc:
        raise IdentityError(str(exc), "key_already_published") from None
    publish_jwks(data, keys)
    return keys


def activate(data: DataDir) -> KeySet:
    """Make the published key active now."""
    try:
        keys = coordinator_keys(data).activate()
    except KeyMaterialError as exc:
        raise IdentityError(str(exc), "no_published_key") from None
    publish_jwks(data, keys)
    return keys
