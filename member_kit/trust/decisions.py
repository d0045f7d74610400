"""The decision trace: what is entered in the decision log, and what is only counted.

The line is the signature. A refusal of a token whose signature verified with a known
issuer's key (expired, for another audience, short of a scope, replayed, bound to another
handoff...) is a decision about an authenticated party: like every allowed call it is kept
in memory (the last ``limit``), logged (an allowed call's facts on its request's access
line, one line per request; a refusal on a line of its own), and appended to the
service's Merkle decision log (:mod:`member_kit.audit.log`), for good. A refusal of
anyone else (no token, a malformed one, a bad signature, an unknown issuer or kid: a
stranger) costs nothing permanent: it is counted by reason (``remote_risk_token_refusals_total`` and
``remote_risk_unauthenticated_refusals_total``) and logged at a bounded rate
(:class:`~agent_cards.edge.rate_limited_log.RateLimitedLog`), never appended, since a log
nobody may prune must not grow at a stranger's request. :meth:`DecisionLog.refused` is
the one place that draws the line, for every binding.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agent_cards.edge.rate_limited_log import RateLimitedLog
from agent_cards.transparency.entries import DECISION_ENTRY
from member_kit.audit.log import DecisionLedger
from member_kit.telemetry import tracing
from member_kit.telemetry.observed import Telemetry
from member_kit.trust.verifier import DelegationDenied, VerifiedDelegation

# The logger operators already filter decisions on (its module was the authorizer's).
logger = logging.getLogger("member_kit.server.auth")

ALLOWED = "allowed"


@dataclass(frozen=True)
class Decision:
    """One authorization decision as recorded: never the token, only what identifies it."""

    at: str
    method: str
    allowed: bool
    reason: str
    http_status: int
    jti: str | None = None
    claims_digest: str | None = None
    owner: str | None = None
    handoff_id: str | None = None
    req_digest: str | None = None
    # The request's trace (W3C trace id), so a decision can be found from a trace and back.
    trace_id: str | None = field(default_factory=tracing.current_trace_id)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)  # every field is a scalar: no deep copy to make


class DecisionLog:
    """The last ``limit`` decisions in memory, each also written to the logger and, with
    a ``ledger``, appended to the service's Merkle decision log; strangers' refusals are
    only counted and logged at a bounded rate (see the module docstring). Each decision
    is counted in ``telemetry``, its app's (a part of its own when built alone)."""

    def __init__(
        self,
        limit: int = 1000,
        ledger: DecisionLedger | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError("a decision log keeps at least one decision")
        self._entries: deque[Decision] = deque(maxlen=limit)
        self.ledger = ledger
        self.telemetry = telemetry or Telemetry.standalone()
        self._strangers = RateLimitedLog(logger)

    def refused(self, method: str, denial: DelegationDenied) -> None:
        """A refusal: a decision if its token verified, else a stranger's (not entered)."""
        if denial.of_authenticated_party:
            self.record(denied(method, denial))
        else:
            self._stranger(method, denial)

    def record(self, decision: Decision) -> None:
        self._entries.append(decision)
        if self.ledger is not None:
            self.ledger.append_later(DECISION_ENTRY, decision.as_dict(), decision.handoff_id)
        self.telemetry.token_decision(decision.method, decision.allowed, decision.reason)
        if decision.allowed and self.telemetry.in_request():
            # one line per request: an allowed call's facts go on its access line
            self.telemetry.note(
                decision=ALLOWED,
                jti=decision.jti,
                claims_digest=decision.claims_digest,
                owner=decision.owner,
            )
            return
        logger.log(
            logging.INFO if decision.allowed else logging.WARNING,
            "delegation %s: method=%s reason=%s status=%d jti=%r digest=%s owner=%r trace=%s",
            ALLOWED if decision.allowed else "denied",
            decision.method,
            decision.reason,
            decision.http_status,
            decision.jti,
            decision.claims_digest,
            decision.owner,
            decision.trace_id,
        )

    def _stranger(self, method: str, denial: DelegationDenied) -> None:
        reason = denial.reason.value
        self.telemetry.token_decision(method, False, reason)
        self.telemetry.unauthenticated_refusal(reason)
        self._strangers.log(
            logging.WARNING,
            reason,
            "delegation denied before authentication: method=%s reason=%s status=%d trace=%s"
            " (counted, not entered in the decision log)",
            method,
            reason,
            denial.http_status,
            tracing.current_trace_id(),
        )

    def __iter__(self) -> Iterator[Decision]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def allowed(method: str, verified: VerifiedDelegation, owner: str) -> Decision:
    return Decision(
        at=_now(),
        method=method,
        allowed=True,
        reason=ALLOWED,
        http_status=200,
        jti=verified.grant.jti,
        claims_digest=verified.claims_digest,
        owner=owner,
        handoff_id=verified.grant.handoff.id,
        req_digest=verified.grant.req_digest,
    )


def denied(method: str, denial: DelegationDenied) -> Decision:
    return Decision(
        at=_now(),
        method=method,
        allowed=False,
        reason=denial.reason.value,
        http_status=denial.http_status,
        jti=denial.jti,
        claims_digest=denial.claims_digest,
    )
