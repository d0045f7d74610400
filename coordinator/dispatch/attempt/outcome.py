"""What one handoff attempt came to, as its callers read it."""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.evidence import Finding
from contracts.handoff import HandoffRecord, HandoffState
from contracts.wire import Task
from coordinator.handoff.returns import Admission
from coordinator.handoff.verdicts import ArtifactDecision


@dataclass
class RemoteOutcome:
    """The handoff record where the attempt left it, the remote task as last seen, the
    return admission and the book's decision, the grant sent (never the token) and notes.

    Only :class:`~coordinator.dispatch.attempt.driver.HandoffDriver` writes it."""

    record: HandoffRecord
    task: Task | None = None
    admission: Admission | None = None
    decision: ArtifactDecision | None = None
    sent_fields: tuple[str, ...] = ()
    grant: dict[str, object] | None = None
    notes: list[str] = field(default_factory=list)
    # The wait (seconds) the remote asked for before the send is made again, when it said.
    retry_after: float | None = None
    # Whether the send's failure says nothing about the work (coordinator.dispatch.retry).
    retryable: bool = False

    @property
    def finding(self) -> Finding | None:
        """The admitted finding, or the remote's own failed finding (for its error code)."""
        if self.admission is None:
            return None
        if self.decision is ArtifactDecision.ADMITTED or self.record.state is HandoffState.FAILED:
            return self.admission.finding
        return None
