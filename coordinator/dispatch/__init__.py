"""A handoff sent and followed to its end, attempt by attempt.

``attempt`` (one attempt driven from admission to a final state: its proposal, its token,
the A2A calls, settling, cancelling, the pause points the crash tests use), ``attempts``
(a transport failure retried as the next attempt, a run's branches cancelled), ``retry``
(the backoff and which failures are worth another attempt), ``delegate`` (one handoff to
a registered agent, as ``federation delegate`` asks).
"""

__all__: list[str] = []
