"""A run: who owns it, how much it may still spend, and every handoff it made.

Ownership is enforced, not labelled: after a transfer, any attempt by the former owner to
continue raises :class:`OwnershipError`. Budgets belong to the whole run, so specialists
cannot reset them by passing work around, and an ownership path may not return to an
owner it already had.

A run is always audited and stored: :class:`Run` refuses to exist without an audit trail
that writes to a ledger and a run store (a :class:`~coordinator.workspace.Workspace`
gives both, over one database). :func:`start_run` is how every entry point begins one;
:meth:`Run.document`
is its document, complete at every point it is written.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from contracts.handoff import HandoffBudget, HandoffRecord
from coordinator.audit.ledger import AuditEvent
from coordinator.audit.trail import AuditTrail
from coordinator.authority.delegator import RunAuthority, authority_document
from coordinator.errors import BudgetExceeded, OwnershipError, UnauditedRun
from coordinator.handoff.admission import ParentAuthority
from coordinator.handoff.book import HandoffBook
from coordinator.handoff.envelope import BudgetEntry, model_totals
from coordinator.handoff.run_state import deciding, delegation_fields, ordered, ownership_row
from coordinator.handoff.verdicts import ArtifactRecord
from coordinator.ids import new_run_id
from coordinator.storage.datadir import DataDir
from coordinator.storage.runs import RunStore, local_driver_id
from coordinator.telemetry import tracing
from coordinator.workspace import Workspace

# The keys of a run's document that :meth:`Run.document` derives (a delegation's summary
# included); any other key a saved document carries is what its driver concluded.
DERIVED = frozenset(
    {
        *("run_id", "trace_id", "span_id", "kind", "owner", "ownership_path", "started_at"),
        *("cancelled", "cancellation", "state_version", "branches", "live_branches"),
        *("artifacts", "budget", "refusals", "handoff_id", "target", "skill", "attempt"),
        *("remote_task_id", "remote_state", "local_state", "reason"),
    }
)


@dataclass(frozen=True)
class RunLimits:
    max_delegations: int = 4
    max_ownership_transfers: int = 1


@dataclass
class Run:
    owner: str
    limits: RunLimits = field(default_factory=RunLimits)
    run_id: str = field(default_factory=new_run_id)
    closed: bool = False
    delegations: int = 0
    ownership_path: list[str] = field(default_factory=list)
    handoffs: dict[str, HandoffRecord] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)
    # What a remote asked when it stopped for input or authorisation, per attempt
    # (untrusted; see coordinator.handoff.question).
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The interface (binding, protocol version, URL) each attempt was sent on.
    interfaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    authority: RunAuthority = field(default_factory=RunAuthority)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    book: HandoffBook = field(init=False)
    # Per-attempt request headers (the bearer token) held in memory only, for calls on the
    # same handoff such as a cancel; never stored, printed or written to a record.
    credentials: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    # handoff id -> {jti: req_digest} of the tokens minted for it by this process (their
    # grants in the ledger say the same; a receipt is checked against these first)
    minted: dict[str, dict[str, str | None]] = field(default_factory=dict, repr=False)
    trail: AuditTrail = field(kw_only=True, repr=False)
    store: RunStore = field(kw_only=True, repr=False)
    # The run's OpenTelemetry trace (the one it started in), the join key of its ledger events.
    trace_id: str = field(default_factory=tracing.trace_id_for_new_run)
    # The span the run started in (None outside any span): later work on the run hangs there.
    span_id: str | None = field(default_factory=tracing.current_span_id)
    announce: bool = True
    kind: str = "pilot"
    driver: str | None = None
    # The data directory the run's agents are registered in (None: nothing there is
    # updated from what the run learns, such as an agent's next key).
    data: DataDir | None = field(default=None, kw_only=True, repr=False)
    # What the run's driver concluded beyond its records (a delegation's verdict, grant,
    # notes): part of every document written after (see :meth:`keep_state`).
    conclusion: dict[str, Any] = field(default_factory=dict, kw_only=True, repr=False)
    _state_changed: bool = field(default=False, init=False, repr=False)
    _hooked: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.trail.ledger is None:
            raise UnauditedRun("a run needs an audit trail that writes to a ledger")
        if not self.ownership_path:
            self.ownership_path.append(self.owner)
        self.authority = self.authority.for_run(self.run_id)
        self.trail.carry(self.store)
        budget = self.authority.budget
        self.book = HandoffBook(
            run_id=self.run_id,
            parent=ParentAuthority(
                scope=self.authority.scopes,
                tenant=self.authority.tenant,
                resources=self.authority.resources,
                expires_at=self.started_at + timedelta(seconds=self.authority.lifetime_seconds),
                remaining=HandoffBudget(
                    actions=budget.actions,
                    context_units=budget.context_units,
                    effects=budget.effects,
                    model_requests=budget.model_requests,
                    model_tokens=budget.model_tokens,
                ),
                max_context_units=self.authority.max_context_units,
            ),
            trail=self.trail,
            trace_id=self.trace_id,
            store=self.store,
            driver=self.driver or local_driver_id(),
            on_change=_while_alive(self._changed),
        )
        if self.announce:
            self.announce_start()

    def announce_start(self) -> None:
        """The run's start on the ledger, and its first row. A store the trail carries
        writes nothing before the trail's first flush (every read of the store flushes it
        first), and :meth:`keep_state` builds the row there, so the state the first
        durable point writes is built once, not once more before it; a store of its own
        writes the row now."""
        if self.store.deferred:
            self._mark_changed()
        else:
            self.keep_document(self.document())
        budget = self.authority.budget
        self.emit(
            "run.started",
            owner=self.owner,
            authority={
                "principal": self.authority.principal,
                "tenant": self.authority.tenant,
                "scope": sorted(self.authority.scopes),
                "budget": budget.model_dump(),
                "expires_at": _time(self.book.parent.expires_at),
            },
        )

    def emit(self, event_type: str, record: HandoffRecord | None = None, **data: object) -> None:
        self.trail.emit(
            event_type, run_id=self.run_id, record=record, trace_id=self.trace_id, data=data
        )

    def hold(
        self, event_type: str, record: HandoffRecord, carried: dict[str, object], **data: object
    ) -> None:
        """:meth:`emit`, held for the event that carries it (``carried``: what it adds to
        that event's data; see :meth:`~coordinator.audit.trail.AuditTrail.hold`)."""
        self.trail.hold(
            event_type,
            run_id=self.run_id,
            record=record,
            trace_id=self.trace_id,
            data=data,
            carried=carried,
        )

    def check_owner(self, caller: str) -> None:
        if self.closed or caller != self.owner:
            self.refusals.append(f"{caller}: not the active owner")
            raise OwnershipError(
                f"{caller!r} is not the active owner of {self.run_id} (owner: {self.owner})"
            )

    def reserve_delegations(self, caller: str, count: int) -> None:
        """Reserve ``count`` consultations at once: a batch that does not fit starts nothing."""
        self.check_owner(caller)
        if self.delegations + count > self.limits.max_delegations:
            raise BudgetExceeded(
                f"{count} more delegations would exceed the run's limit of "
                f"{self.limits.max_delegations}",
                "delegation_budget_exhausted",
            )
        self.delegations += count

    def transfer_ownership(self, caller: str, target: str) -> None:
        self.check_owner(caller)
        if target in self.ownership_path:
            raise OwnershipError(
                f"ownership may not return to earlier owner {target!r}", "ownership_cycle"
            )
        if len(self.ownership_path) - 1 >= self.limits.max_ownership_transfers:
            raise BudgetExceeded("ownership transfer limit reached", "transfer_budget_exhausted")
        self.emit("ownership.transferred", None, from_owner=self.owner, to=target)
        self.owner = target
        self.ownership_path.append(target)

    def asked(self, handoff: HandoffRecord, question: dict[str, Any]) -> None:
        """Keep what the remote asked (untrusted) for the run's document and the ledger."""
        self.questions[handoff.attempt_id] = question
        self.emit("remote.asked", handoff, **question)

    def carried_on(self, handoff: HandoffRecord, interface: dict[str, Any]) -> dict[str, Any]:
        """Remember the interface ``handoff`` is sent on (for the run's document)."""
        self.interfaces[handoff.attempt_id] = interface
        return interface

    def record(self, handoff: HandoffRecord) -> HandoffRecord:
        self.handoffs[handoff.attempt_id] = handoff
        return handoff

    def forget(self, handoff: HandoffRecord) -> None:
        """Drop an admission none of which landed (the store refused the transaction that
        carried it): it is no branch of the run, in memory or in the state written next."""
        self.book.forget(handoff)
        self.handoffs.pop(handoff.attempt_id, None)
        self.interfaces.pop(handoff.attempt_id, None)
        self._mark_changed()

    def _changed(self, handoff: HandoffRecord) -> None:
        """Every change the book makes to a handoff: the run's state follows it, at the
        trail's next flush (:meth:`_flushing`)."""
        self.record(handoff)
        self._mark_changed()

    def _mark_changed(self) -> None:
        """The run's state changed: its row is built and written at the trail's next
        flush, and until that flush the trail holds the run (a hook of one flush), so a
        change is never lost with the run object. Held for good, the run and its trail
        would refer to each other, a cycle only the garbage collector frees (with every
        record, message and task of the run): at c=32 that was most of its work."""
        self._state_changed = True
        if not self._hooked:
            self._hooked = True
            self.trail.before_flush.append(self._flushing)

    def _flushing(self) -> None:
        if self._state_changed:
            self.keep_state()
        self._hooked = False  # (a hook that failed stays for the next flush)

    def keep_state(self) -> dict[str, Any]:
        """The one writer of the run's state: its document as its records stand now (see
        :mod:`coordinator.handoff.run_state`) with what was concluded, written with the
        trail's next flush, in the transaction of the handoff rows and ledger events it
        derives from. Every path that changes a handoff (the CLI's ``delegate``, the
        API's submit and workers, recovery, a cancel from any process) goes through the
        book, whose changes have the run's trail call this before it flushes; so a run
        is live everywhere from its first branch on. Returns the document kept."""
        document = self.document(**self.conclusion)
        self.keep_document(document)
        return document

    def conclude(self, **conclusion: Any) -> dict[str, Any]:
        """Keep what the driver concluded (beyond the records) in the run's state; the
        run's document with it, as kept."""
        self.conclusion = conclusion
        return self.keep_state()

    def save(self, document: object) -> None:
        """Write the run's document, with every fact still pending, in one transaction."""
        self.keep_document(document)
        self.trail.flush()

    async def save_durable(self, document: object) -> None:
        """:meth:`save` for a coroutine: committed by the process's database writer, the
        event loop going on meanwhile."""
        self.keep_document(document)
        await self.trail.flush_durable()

    def keep_document(self, document: object) -> None:
        """The run's row, written with the trail's next flush. What ``document`` says
        beyond the records (a pilot's case, a delegation's verdict) is kept for every
        row written after it (:meth:`keep_state`)."""
        if isinstance(document, dict):
            self.conclusion = {k: v for k, v in document.items() if k not in DERIVED}
        self._state_changed = False
        authority = self._row_authority
        self.store.save_run(self.run_id, self.owner, self.kind, authority, document, deferred=True)

    @cached_property
    def _row_authority(self) -> dict[str, object]:
        """The run's authority as its row keeps it (fixed for the run's life, so built
        once: the store writes it with the run's first row)."""
        authority = authority_document(self.authority)
        authority["started_at"] = self.started_at.isoformat()
        return authority

    def document(self, **extra: Any) -> dict[str, Any]:
        """The operator's view of the run, from its records alone (never conversation text):
        owner, branches with their state and lease, artifacts with their verdicts, budget."""
        book = self.book
        rows = ownership_rows(self)
        return {
            "run_id": self.run_id,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "kind": self.kind,
            "owner": self.owner,
            "ownership_path": list(self.ownership_path),
            "started_at": _time(self.started_at),
            "cancelled": book.cancelled,
            "cancellation": dict(book.cancellation) if book.cancellation else None,
            "state_version": book.state_version,
            "branches": rows,
            "live_branches": [row["branch"] for row in rows if row["live"]],
            "artifacts": [artifact_row(a) for a in book.artifacts],
            "budget": {
                "limit": book.parent.remaining.model_dump(),
                "remaining": book.remaining().model_dump(),
                "ledger": [unit_row(u) for u in book.units],
                "model": model_totals(book.units),
            },
            "refusals": list(self.refusals),
            **self.summary(),
            **extra,
        }

    def summary(self) -> dict[str, Any]:
        """A delegation's one-handoff summary from its records (nothing for other runs)."""
        if self.kind != "delegation":
            return {}
        return delegation_fields(deciding(ordered(self.handoffs.values())))

    def close(self, caller: str) -> None:
        self.check_owner(caller)
        self.closed = True


def start_run(
    ws: Workspace,
    owner: str,
    *,
    authority: RunAuthority | None = None,
    kind: str = "pilot",
    limits: RunLimits | None = None,
    listener: Callable[[AuditEvent], None] | None = None,
) -> Run:
    """Begin a run: announced on the ledger and stored before anything else happens;
    ``listener`` is told of each of its events as it happens, its start first."""
    trail = ws.trail()
    trail.listener = listener
    return Run(
        owner=owner,
        authority=authority or RunAuthority(),
        limits=limits or RunLimits(),
        kind=kind,
        trail=trail,
        store=ws.run_store(),
        data=ws.data,
    )


def _while_alive(method: Callable[[HandoffRecord], None]) -> Callable[[HandoffRecord], None]:
    """``method``, called only while its object lives: the book tells its run of each
    change without keeping the run alive (the run holds the book)."""
    bound = weakref.WeakMethod(method)

    def call(record: HandoffRecord) -> None:
        alive = bound()
        if alive is not None:
            alive(record)

    return call


def _time(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def ownership_rows(run: Run) -> list[dict[str, Any]]:
    return [
        ownership_row(
            record, run.questions.get(record.attempt_id), run.interfaces.get(record.attempt_id)
        )
        for record in run.handoffs.values()
    ]


def artifact_row(artifact: ArtifactRecord) -> dict[str, Any]:
    return {
        "branch": f"{artifact.handoff_id}/{artifact.attempt}",
        "contract": artifact.contract,
        "decision": artifact.decision.value,
        "reason": artifact.reason,
        "content_hash": artifact.content_hash,
        "size": artifact.size,
        "received_at": _time(artifact.received_at),
        "content": artifact.content,
    }


def unit_row(entry: BudgetEntry) -> dict[str, Any]:
    return {
        "branch": f"{entry.handoff_id}/{entry.attempt}",
        "kind": entry.kind.value,
        "actions": entry.actions,
        "context_units": entry.context_units,
        "effects": entry.effects,
        "model_requests": entry.model_requests,
        "model_tokens": entry.model_tokens,
        "reason": entry.reason,
    }
