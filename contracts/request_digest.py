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

A member ProtoJSON leaves out at its default counts as absent (:func:`proto_normal`): an
empty ``taskId`` or ``contextId``, an empty ``referenceTaskIds`` or ``extensions`` list,
``ROLE_UNSPECIFIED``, a part's empty ``filename`` or ``mediaType``, a null. gRPC cannot
carry them at all, so without this the same message would have one digest as JSON and
another as protobuf. A part's content (``text``, ``raw``, ``url``, ``data``, a oneof) is
kept even when empty, as protobuf keeps it, and ``raw`` is read as the bytes it encodes
(standard base64 with padding, the spelling protobuf prints).

Pure: no clock, no keys, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from typing import Any

from contracts.canonical import canonical_json

REQUEST_DIGEST_CLAIM = "req_digest"
DIGEST_PREFIX = "sha-256:"
COVERED_MEMBERS = ("role", "parts", "taskId", "contextId", "referenceTaskIds", "extensions")
COVERED_METADATA = ("handoffId", "attempt", "skillId", "stateVersion", "idempotencyKey")
# What ProtoJSON prints for a field left at its default (and so cannot tell from absence).
_DEFAULTS: tuple[Any, ...] = (None, "", [], "ROLE_UNSPECIFIED")
_PART_DEFAULTED = ("filename", "mediaType", "metadata")


def proto_normal(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` without the covered members at their ProtoJSON default, and each part
    without its defaulted members (see the module)."""
    normal = {
        name: value
        for name, value in message.items()
        if name not in COVERED_MEMBERS or not _is_default(value)
    }
    parts = normal.get("parts")
    if isinstance(parts, list):
        normal["parts"] = [_part(part) for part in parts]
    return normal


def _is_default(value: Any) -> bool:
    return any(value == default and type(value) is type(default) for default in _DEFAULTS)


def _part(part: Any) -> Any:
    if not isinstance(part, Mapping):
        return part
    kept = {
        name: value
        for name, value in part.items()
        if name not in _PART_DEFAULTED or not _is_default(value)
    }
    if isinstance(kept.get("raw"), str):
        kept["raw"] = _standard_base64(kept["raw"])
    return kept


def _standard_base64(text: str) -> str:
    """``text`` as protobuf prints the bytes it encodes; unchanged if it encodes none."""
    try:
        padded = text + "=" * (-len(text) % 4)
        decoded = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return text
    return base64.b64encode(decoded).decode("ascii")


def covered_request(message: Mapping[str, Any]) -> dict[str, Any]:
    """The members of ``message`` (wire JSON, :func:`proto_normal`) the digest covers."""
    message = proto_normal(message)
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
