"""The authoritative book of one run's handoffs: records, keys, leases, budget units, artifacts.

Every change to a handoff goes through :meth:`HandoffBook.commit`, guarded by the version
the caller based it on. That is how races are decided by authoritative revision rather
than by arrival order: whoever commits first wins, and the loser learns its view was
stale. A result that loses to a cancel is recorded as ``late_after_cancel``, one that
loses to a lease expiry as ``late_after_lease``; both are kept for diagnosis, neither is
admitted, neither consumes budget, and neither can revive a terminal handoff.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent_cards.clock import utc_now
from contracts import strict_json
from contracts.handoff import (
    HandoffBudget,
    HandoffRecord,
    HandoffState,
    StateRef,
    TransitionError,
    transition,
)
from coordinator.audit.log.events import ADMITTED_EVENT, TRANSITION_EVENT, UNITS_EVENT
from coordinator.audit.trail import AuditTrail, Cause, contract_of
from coordinator.errors import RunCancelled, StaleRevision
from coordinator.handoff.admission import AdmissionContext, AdmissionDenied, ParentAuthority, admit
from coordinator.handoff.envelope import (
    BudgetEntry,
    UnitKind,
    entry,
    local_spend,
    plus,
    refused,
    remaining,
    settlement,
)
from coordinator.handoff.verdicts import (
    JUDGED,
    ArtifactDecision,
    ArtifactRecord,
    Move,
    decide,
    verdict_facts,
)
from coordinator.storage.runs import RunStore

S = HandoffState
Clock = Callable[[], datetime]


@dataclass
class HandoffBook:
    run_id: str
    parent: ParentAuthority
    clock: Clock = utc_now
    state_version: int = 0
    cancelled: bool = False
    cancel_ref: str = ""
    # Who cancelled the run, why and when (``by``, ``reason``, ``at``), once it is cancelled.
    cancellation: dict[str, str] | None = None
    records: dict[str, HandoffRecord] = field(default_factory=dict)
    active_keys: dict[str, str] = field(default_factory=dict)
    completed_keys: dict[str, str] = field(default_factory=dict)
    units: list[BudgetEntry] = field(default_factory=list)
    artifacts: list[ArtifactRecord] = field(default_factory=list)
    trail: AuditTrail = field(default_factory=AuditTrail)
    trace_id: str | None = None
    store: RunStore | None = None
    # The process driving this book's handoffs holds their lease rows while it does.
    driver: str | None = None
    driver_lease_seconds: float = 15.0
    # Told of every record the book makes authoritative (the run keeps its state by it).
    on_change: Callable[[HandoffRecord], None] | None = None

    def __post_init__(self) -> None:
        self.cancel_ref = self.cancel_ref or f"cancel-{self.run_id}"

    def _emit(self, event_type: str, record: HandoffRecord | None, **data: object) -> None:
        self.trail.emit(
            event_type, run_id=self.run_id, record=record, trace_id=self.trace_id, data=data
        )

    def _keep(self, record: HandoffRecord) -> HandoffRecord:
        """Make ``record`` the authoritative one, in memory and (if any) in the store."""
        self.records[record.attempt_id] = record
        if self.store is not None:
            self.store.save_handoff(record, self.driver, self.driver_lease_seconds)
        if self.on_change is not None:
            self.on_change(record)
        return record

    def _unit(self, unit: BudgetEntry, record: HandoffRecord | None) -> None:
        """Book ``unit`` as an event of its own: for units no other event stands for."""
        self._emit(UNITS_EVENT, record, **self._book(unit))

    def _book(self, unit: BudgetEntry) -> dict[str, object]:
        """Keep ``unit`` (in memory and, if any, in the store); its figures, as the ledger
        records them (in the event that moved them, or in a :data:`UNITS_EVENT`)."""
        self.units.append(unit)
        figures: dict[str, object] = {
            "kind": unit.kind.value,
            "actions": unit.actions,
            "context_units": unit.context_units,
            "effects": unit.effects,
            "model_requests": unit.model_requests,
            "model_tokens": unit.model_tokens,
            "reason": unit.reason,
        }
        if self.store is not None:
            attempt_id = f"{unit.handoff_id}/{unit.attempt}"
            self.store.add(
                "budget_units", {"run_id": self.run_id, "attempt_id": attempt_id, **figures}
            )
        return figures

    # --- state of the run -------------------------------------------------------------

    @property
    def state_ref(self) -> StateRef:
        return StateRef(id=self.run_id, version=self.state_version)

    def advance_state(self) -> int:
        """The run's authoritative state moved on; results cut from older versions are stale."""
        self.state_version += 1
        return self.state_version

    def remaining(self, before: HandoffRecord | None = None) -> HandoffBudget:
        """What the run has left; with ``before``, as it was before that handoff reserved."""
        left = remaining(self.parent.remaining, self.units)
        return plus(left, before.budget) if before is not None else left

    def spend(self, role: str, requests: int, tokens: int | None) -> None:
        """Model requests the coordinator's own ``role`` made for the run, outside any
        handoff's envelope: they count as spent (see :mod:`coordinator.handoff.envelope`)."""
        self._unit(local_spend(role, requests, tokens), None)

    # --- admission --------------------------------------------------------------------

    def admit(
        self, record: HandoffRecord, ctx: AdmissionContext, *, hold: bool = False
    ) -> HandoffRecord:
        """Admit and reserve, or record the refusal and raise :class:`AdmissionDenied`.
        ``hold``: the admission is held for the dispatch that carries it (the trail's
        :meth:`~coordinator.audit.trail.AuditTrail.hold`), not recorded at once."""
        if self.cancelled:
            self._refuse(record, "run_cancelled")
            raise RunCancelled(f"run {self.run_id} is cancelled; nothing new is dispatched")
        parent = ParentAuthority(
            scope=self.parent.scope,
            tenant=self.parent.tenant,
            resources=self.parent.resources,
            expires_at=self.parent.expires_at,
            remaining=self.remaining(),
            max_context_units=self.parent.max_context_units,
        )
        context = AdmissionContext(
            participants=ctx.participants,
            target_capabilities=ctx.target_capabilities,
            read_only_skills=ctx.read_only_skills,
            current_state_version=self.state_version,
            active_keys=frozenset(self.active_keys),
            completed_keys=frozenset(self.completed_keys),
        )
        try:
            admitted = admit(record, parent, context)
        except AdmissionDenied as denial:
            denied = self._keep(transition(record, S.REJECTED, denial.reason))
            self._emit(
                "handoff.denied",
                denied,
                contract=contract_of(record),
                state=denied.state.value,
                reason=denial.reason,
                units=[self._book(refused(record, denial.reason))],
            )
            raise
        budget = admitted.budget
        assert budget is not None and admitted.duplicate_key is not None
        self.active_keys[admitted.duplicate_key] = admitted.attempt_id
        self._keep(admitted)
        facts = {"contract": contract_of(admitted), "state": admitted.state.value}
        facts["reason"] = admitted.reason
        units = [self._book(entry(admitted, UnitKind.RESERVED, budget, admitted.reason))]
        if not hold:
            self._emit(ADMITTED_EVENT, admitted, **facts, units=units)
            return admitted
        carried = {"admission": facts, "units": units}
        self.trail.hold(
            ADMITTED_EVENT, run_id=self.run_id, record=admitted, trace_id=self.trace_id,
            data={**facts, "units": units}, carried=carried,
        )  # fmt: skip
        return admitted

    def _refuse(self, record: HandoffRecord, reason: str) -> None:
        self._unit(refused(record, reason), record)

    # --- every later change -------------------------------------------------------------

    def current(self, record: HandoffRecord) -> HandoffRecord:
        return self.records[record.attempt_id]

    def commit(
        self,
        based_on: HandoffRecord,
        to: HandoffState,
        reason: str,
        *,
        cause: Cause | None = None,
        **changes: object,
    ) -> HandoffRecord:
        """Move a handoff, provided nobody moved it since ``based_on`` was read. The move
        is recorded in the ledger as a ``handoff.transition``, or, given the ``cause`` of
        the move (an event not yet recorded: the dispatch, an artifact's verdict), as that
        event carrying it. A refused move records nothing, its cause neither."""
        try:
            record = transition(
                self.records[based_on.attempt_id],
                to,
                reason,
                expected_version=based_on.version,
                at=self.clock(),
                **changes,
            )
        except TransitionError as exc:
            raise StaleRevision(str(exc), exc.reason) from None
        previous = self.records[record.attempt_id]
        self._keep(record)
        settled = self._settle(record) if record.terminal else []
        moved: dict[str, object] = {"from": previous.state.value, "to": to.value}
        moved.update(reason=reason, version=record.version)
        units = {"units": settled} if settled else {}
        if cause is None:
            self._emit(TRANSITION_EVENT, record, **moved, **units)
        else:
            self._emit(cause.event_type, record, **cause.data, transition=moved, **units)
        return record

    def tell(self, cause: Cause, record: HandoffRecord) -> None:
        """Record ``cause`` as an event of its own (its move was refused, or none came)."""
        self._emit(cause.event_type, record, **cause.data)

    def held_for(self, record: HandoffRecord) -> Cause | None:
        """The fact held for ``record``'s next move, taken (the move records it, or, if
        the move is refused, :meth:`tell`); see the trail's
        :meth:`~coordinator.audit.trail.AuditTrail.take_cause`."""
        return self.trail.take_cause(record)

    def note(
        self, based_on: HandoffRecord, *, hold: bool = False, **changes: object
    ) -> HandoffRecord:
        """Update observations (remote ids and states) without a state transition. With
        ``hold``, the remote state observed is held for the move it causes, which records
        it (:meth:`held_for`), instead of being recorded at once."""
        current = self.records[based_on.attempt_id]
        if current.version != based_on.version:
            raise StaleRevision(f"handoff {current.handoff_id} moved on", "stale_version")
        if all(getattr(current, name) == value for name, value in changes.items()):
            return current  # an observation that changes nothing writes nothing
        record = self._keep(current.model_copy(update=changes))
        if "remote_state" in changes and changes["remote_state"] != current.remote_state:
            seen: dict[str, object] = {"remote_state": record.remote_state}
            seen["local_state"] = record.state.value
            if hold:  # for the move it causes (``held_for``), which records it
                self.trail.hold(
                    "remote.state_observed", run_id=self.run_id, record=record,
                    trace_id=self.trace_id, data=seen, carried=None,
                )  # fmt: skip
            else:
                self._emit("remote.state_observed", record, **seen)
        if "lease_expires_at" in changes:
            self._emit("lease.renewed", record, lease_expires_at=str(record.lease_expires_at))
        return record

    def _settle(self, record: HandoffRecord) -> list[dict[str, object]]:
        """Close the handoff's envelope: what was spent is consumed, the rest released;
        the units booked (the transition that ended the handoff records them)."""
        budget = record.budget
        if budget is None or record.duplicate_key is None:
            return []
        if self.active_keys.get(record.duplicate_key) == record.attempt_id:
            del self.active_keys[record.duplicate_key]
        if record.state is S.ACCEPTED:
            self.completed_keys[record.duplicate_key] = record.attempt_id
        reason = record.state.value.lower()
        settled = settlement(record)
        return [self._book(entry(record, kind, figures, reason)) for kind, figures in settled]

    # --- leases -------------------------------------------------------------------------

    def renew(self, based_on: HandoffRecord, seconds: float) -> HandoffRecord:
        """Extend a live lease; a lease that already ended cannot be renewed."""
        current = self.records[based_on.attempt_id]
        now = self.clock()
        if not current.live or current.lease_expires_at is None or now >= current.lease_expires_at:
            raise StaleRevision(f"lease of {current.handoff_id} already ended", "lease_expired")
        until = min(now + timedelta(seconds=seconds), self.parent.expires_at)
        return self.note(based_on, lease_expires_at=until)

    def expire_leases(self) -> list[HandoffRecord]:
        """Time out every live handoff whose lease has ended; returns them (to cancel)."""
        now = self.clock()
        expired = []
        for record in list(self.records.values()):
            if record.live and record.lease_expires_at and now >= record.lease_expires_at:
                expired.append(self.commit(record, S.TIMED_OUT, "lease_expired"))
        return expired

    # --- cancellation -------------------------------------------------------------------

    def cancel(
        self, reason: str = "run_cancelled", *, by: str = "", why: str = ""
    ) -> list[HandoffRecord]:
        """Commit the run's cancellation; returns the branches that were live (to cancel).

        ``by`` and ``why`` say who cancelled it and why (the operator's own words); they are
        in the ledger event and in the run's document."""
        self.cancelled = True
        if by or why:
            self.cancellation = {"by": by, "reason": why, "at": _time_text(self.clock())}
        self._emit("run.cancelled", None, reason=reason, cancel_ref=self.cancel_ref, by=by, why=why)
        return [
            self.commit(record, S.CANCELLED, reason)
            for record in list(self.records.values())
            if record.live or record.state is S.RETURNED
        ]

    def forget(self, record: HandoffRecord) -> None:
        """Undo an admission that never landed (see :meth:`Run.forget`): its record, its
        hold on the duplicate key and its reserved units."""
        self.records.pop(record.attempt_id, None)
        key = record.duplicate_key
        if key is not None and self.active_keys.get(key) == record.attempt_id:
            del self.active_keys[key]
        kept = (record.handoff_id, record.attempt)
        self.units = [unit for unit in self.units if (unit.handoff_id, unit.attempt) != kept]

    def adopt(self, record: HandoffRecord, units: list[BudgetEntry]) -> HandoffRecord:
        """Take a revision committed by another process (a cancel from the command line or
        the API) as authoritative here, with the run's budget units as stored: nothing is
        written, the other process already did."""
        self.records[record.attempt_id] = record
        self.units = list(units)
        key = record.duplicate_key
        if record.terminal and key is not None and self.active_keys.get(key) == record.attempt_id:
            del self.active_keys[key]
        if record.state is S.CANCELLED:
            self.cancelled = True
        if self.on_change is not None:
            self.on_change(record)
        self._emit(
            "handoff.ended_elsewhere",
            record,
            state=record.state.value,
            reason=record.reason,
            version=record.version,
        )
        return record

    # --- artifacts ----------------------------------------------------------------------

    def receive(
        self,
        based_on: HandoffRecord,
        *,
        admitted: bool,
        reason: str,
        content_hash: str,
        size: int,
        content: object = None,
        held: bool = False,
        move: Move | None = None,
        carried: Mapping[str, object] | None = None,
    ) -> ArtifactDecision:
        """Decide what a returned artifact is, given the handoff's authoritative state now,
        keep it and record the verdict. Given ``move`` (where a verdict moves the
        handoff), the verdict's event records that move too; a move refused, the verdict
        is recorded alone. ``carried``: facts the verdict's event records with it (the
        receipt the return came with).

        ``held`` says no contract could judge it: it is kept for review, never admitted."""
        current = self.records[based_on.attempt_id]
        key = current.duplicate_key
        completed = key is not None and key in self.completed_keys
        decision = decide(
            current, based_on, admitted, completed=completed, state_version=self.state_version
        )
        if held and decision is ArtifactDecision.REJECTED:
            decision = ArtifactDecision.HELD_FOR_REVIEW
        artifact = ArtifactRecord(
            handoff_id=current.handoff_id,
            attempt=based_on.attempt,
            decision=decision,
            reason=reason if decision in JUDGED else decision.value,
            content_hash=content_hash,
            size=size,
            received_at=self.clock(),
            # Refused content is kept for diagnosis; admitted content lives in the finding.
            content=None if decision is ArtifactDecision.ADMITTED else content,
            contract=current.return_contract.name,
        )
        self._keep_artifact(current, artifact, content)
        facts = {**verdict_facts(artifact, reason, current.remote_task_id), **(carried or {})}
        verdict = Cause(f"artifact.{decision.value}", facts)
        if move is not None:
            try:
                self.commit(based_on, *move(decision, reason), cause=verdict)
                return decision
            except StaleRevision:
                pass
        self.tell(verdict, current)
        return decision

    def _keep_artifact(
        self, current: HandoffRecord, artifact: ArtifactRecord, content: object
    ) -> None:
        self.artifacts.append(artifact)
        if self.store is None:
            return
        self.store.add(
            "artifacts",
            {
                "run_id": self.run_id,
                "attempt_id": current.attempt_id,
                "decision": artifact.decision.value,
                "reason": artifact.reason,
                "content_hash": artifact.content_hash,
                "size": artifact.size,
                # The exact artifacts as received, admitted ones too: a proof
                # bundle carries them to check the receipt's artifact digest.
                "content": None if content is None else strict_json.dumps(content).decode(),
                "received_at": artifact.received_at.isoformat(),
            },
        )


def _time_text(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")
