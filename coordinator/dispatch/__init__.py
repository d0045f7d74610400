"""Driving one handoff attempt: admit, mint, send, follow, settle, judge, cancel.

``proposal`` (a handoff's full contract and message before it is sent), ``driver`` (the
:class:`~coordinator.dispatch.driver.HandoffDriver` that owns one attempt from admission
to a final state), ``attempt_state`` (what an attempt needs and its record as it stands),
``settling`` (what a settled remote task came to), ``cancelling`` (``CancelTask`` for a
handoff's remote task), ``grants`` (the attempt's narrowed token), ``remote_calls`` (the A2A
calls, nothing of the record), ``outcome`` (what an attempt came to), ``attempts``
(retries as attempts, cancelling a run's branches), ``delegate`` (one handoff to a
registered agent, as ``federation delegate`` asks), ``faults`` (named pause points the
crash tests use).
"""

__all__: list[str] = []
