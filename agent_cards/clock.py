"""The one clock every service reads: the current time, timezone-aware, in UTC.

Code that must be testable at a fixed time takes a clock (a callable returning what
:func:`utc_now` returns) and defaults to this one.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["utc_now"]


def utc_now() -> datetime:
    """Now, in UTC (never a naive datetime)."""
    return datetime.now(UTC)
