"""One model budget for a supervised run, kept in the run's budget ledger.

The run's authority names as many model requests as the gateway's budget has left, so
every grant the run mints carves its remote's requests from that same budget; each
request the coordinator's own roles make is booked in the ledger as spent, so what is
left for a handoff is what the whole federation has left.
"""

from __future__ import annotations

import dataclasses

from coordinator.assessment.model_gateway import REMOTE_OUTCOME, ModelGateway
from coordinator.authority.delegator import RunAuthority
from coordinator.handoff.run import Run


def authority_for(gateway: ModelGateway, authority: RunAuthority | None) -> RunAuthority:
    """``authority`` whose model-request budget is what ``gateway``'s budget has left."""
    base = authority or RunAuthority()
    budget = gateway.budget
    left = max(0, budget.limit - budget.attempted)
    if base.budget.model_requests is not None:
        left = min(left, base.budget.model_requests)
    return dataclasses.replace(base, budget=base.budget.model_copy(update={"model_requests": left}))


class LocalRequests:
    """Books the gateway's own requests (not those remotes reported) in the run's ledger."""

    def __init__(self, run: Run, gateway: ModelGateway) -> None:
        self.run, self.gateway = run, gateway
        self._seen = len(gateway.calls)

    def book(self) -> None:
        calls, self._seen = self.gateway.calls[self._seen :], len(self.gateway.calls)
        for call in calls:
            if call.outcome != REMOTE_OUTCOME:
                tokens = call.usage.total_tokens if call.usage else None
                self.run.book.spend(call.role, 1, tokens)
