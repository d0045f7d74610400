"""The coordinator's own identity: its issuer id and the keys it signs delegations with.

Keys live in the data directory (``keys/``, owner-only permissions) and are created on
first use. The public half is also written to ``jwks.json`` in the data directory, which
is what a remote service's operator pins as this coordinator's trusted issuer.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from agent_cards.keys import KeyMaterialError, KeySet, load_or_create
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.errors import IdentityError
from coordinator.storage.datadir import DataDir

ISSUER_ENV = "FEDERATION_ISSUER"
JWKS_FILE = "jwks.json"


def issuer_id() -> str:
    return os.environ.get(ISSUER_ENV) or DEFAULT_ISSUER


def coordinator_keys(data: DataDir) -> KeySet:
    try:
        keys = load_or_create(data.path("keys"))
    except (KeyMaterialError, OSError) as exc:
        raise IdentityError(f"cannot load the coordinator's signing keys: {exc}") from None
    publish_jwks(data, keys)
    return keys


def publish_jwks(data: DataDir, keys: KeySet) -> Path:
    data.write_json(keys.public_jwks(), JWKS_FILE)
    return data.path(JWKS_FILE)


def rotate(data: DataDir, grace_seconds: int) -> KeySet:
    """Add a new active key; earlier keys keep verifying for ``grace_seconds``."""
    keys = coordinator_keys(data).rotate(grace=timedelta(seconds=grace_seconds))
    publish_jwks(data, keys)
    return keys
