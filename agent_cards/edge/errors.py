"""Every exception the HTTP edge raises, each with a stable reason code: a branch of the
shared tree (:mod:`agent_cards.errors`).

::

    EdgeError (a SharedError and a ValueError)
    ├── LimitsError       a limit set to something the edge cannot run with (at start)
    ├── JSONShapeError    a JSON body outside the accepted shape: json_not_utf8,
    │                     json_lone_surrogate, json_too_deep, json_too_wide,
    │                     json_number_out_of_range
    └── WeakOperatorToken an operator token too short or too patterned to be a secret (at start)
"""

from __future__ import annotations

from agent_cards.errors import SharedError


class EdgeError(SharedError, ValueError):
    """Base of every deliberate error of the edge."""


class LimitsError(EdgeError):
    def __init__(self, message: str) -> None:
        super().__init__("limits_invalid", message)


class JSONShapeError(EdgeError):
    """A body outside the shape the edge accepts; ``reason`` is a stable code."""


class WeakOperatorToken(EdgeError):
    """An operator token that cannot be a secret: ``operator_token_weak``."""

    def __init__(self, message: str) -> None:
        super().__init__("operator_token_weak", message)
