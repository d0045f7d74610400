"""The request digest: what a delegation token says was asked, bound to the exact message.

The coordinator puts :func:`request_digest` of the message it sends into the token it
mints for that send (claim ``req_digest``); the remote computes the same function over
the message it received and refuses a mismatch (``request_digest_mismatch``). A token
replayed with other message text, other parts or another skill then no longer fits, so
the token is the coordinator's signed statement of what it asked.

The digest is ``"sha-256:" + base64url(SHA-256(JCS(covered)))`` (RFC 8785, base64url
without padding), where ``covered`` is a JSON object holding, of the message as sent on
the wire (ProtoJSON names), exactly the members of :data:`COVERED_MEMBERS` that are
present, and under ``metadata`` exactly the members of :data:`COVERED_METADATA` that are
present. ``messageId`` is not covered (a transport identifier); other metadata members
are not covered and the remote acts on none of them. docs/delegation-token.md specifies
it for other implementations.

Pure: no clock, no keys, no I/O.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

from contracts.canonical import canonical_json

REQUEST_DIGEST_CLAIM = "req_digest"
DIGEST_PREFIX = "sha-256:"
COVERED_MEMBERS = ("role", "parts", "taskId", "contextId", "referenceTaskIds", "extensions")
COVERED_METADATA = ("handoffId", "attempt", "skillId", "stateVersion", "idempotencyKey")


def covered_request(message: Mapping[str, Any]) -> dict[str, Any]:
    """The members of ``message`` (wire JSON) that the digest covers."""
    covered = {name: message[name] for name in COVERED_MEMBERS if name in message}
    metadata = message.get("metadata")
    if isinstance(metadata, Mapping):
        covered["metadata"] = {
            name: metadata[name] for name in COVERED_METADATA if name in metadata
        }
    return covered


def request_digest(message: Mapping[str, Any]) -> str:
    """``sha-256:<base64url>`` over the JCS form of :func:`covered_request`; raises
    :data:`~contracts.canonical.CanonicalizationError` for a value JCS cannot represent."""
    digest = hashlib.sha256(canonical_json(covered_request(message))).digest()
    return DIGEST_PREFIX + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
