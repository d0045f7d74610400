"""Driving one handoff attempt: admit, mint, send, follow, settle, judge, cancel.

``proposal`` (a handoff's full contract and message before it is sent), ``driver`` (the
:class:`~coordinator.dispatch.attempt.driver.HandoffDriver` that owns one attempt from
admission to a final state), ``attempt_state`` (what an attempt needs and its record as it
stands), ``settling`` (what a settled remote task came to), ``cancelling`` (``CancelTask``
for a handoff's remote task), ``elsewhere`` (an ending another process wrote first),
``grants`` (the attempt's narrowed token), ``remote_calls`` and ``card_caller`` (the A2A
calls, nothing of the record), ``send_modes`` (blocking, streamed or polled), ``receipts``
(the remote's receipt kept), ``outcome`` (what an attempt came to), ``observed`` (its
spans and metrics), ``faults`` (named pause points the crash tests use).
"""

__all__: list[str] = []
