"""Failed console logins, counted per client address: the edge's one
:class:`~agent_cards.edge.throttle.FailureThrottle` (see there), under the console's name.
"""

from __future__ import annotations

from agent_cards.edge.throttle import (
    DEFAULT_ATTEMPTS,
    DEFAULT_MAX_CLIENTS,
    DEFAULT_WINDOW_SECONDS,
    FailureThrottle,
)

__all__ = ["DEFAULT_ATTEMPTS", "DEFAULT_MAX_CLIENTS", "DEFAULT_WINDOW_SECONDS", "LoginThrottle"]

LoginThrottle = FailureThrottle
