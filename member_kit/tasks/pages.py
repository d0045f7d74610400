"""ListTasks paging and filters: page tokens and timestamps.

A token is the sort key of the last task on the previous page. It is opaque to callers,
names no task, and stays valid when tasks are added: the next page simply continues below
that key.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime

from contracts import strict_json
from member_kit import errors


def wire_timestamp(at: datetime) -> str:
    """ISO-8601 in UTC with millisecond precision and a trailing ``Z``."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode_page_token(key: tuple[datetime, int]) -> str:
    at, sequence = key
    raw = json.dumps([wire_timestamp(at), sequence]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str) -> tuple[datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        stamp, sequence = strict_json.loads(raw)
        at = datetime.fromisoformat(stamp)
        if not isinstance(sequence, int) or at.tzinfo is None:
            raise ValueError
    except (ValueError, TypeError, binascii.Error):
        raise errors.InvalidParams(
            "params.pageToken: not a page token this agent issued; start again without one"
        ) from None
    return (at, sequence)


def parse_timestamp(value: str | None, name: str) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise errors.InvalidParams(
            f"params.{name}: not an ISO-8601 timestamp such as 2026-01-31T12:00:00Z"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
