"""Driving one handoff attempt: admit, mint, send, follow, settle, judge, cancel.

``driver`` (one attempt from proposal to a final state), ``delegate`` (one handoff to a
registered agent, as ``federation delegate`` asks), ``faults`` (named pause points the
crash tests use).
"""

from coordinator.dispatch.delegate import DelegationOrder, delegate_once

__all__ = ["DelegationOrder", "delegate_once"]
