"""A run enforces its owner and its run-wide budgets."""

from __future__ import annotations

import pytest

from coordinator.errors import BudgetExceeded, OwnershipError
from coordinator.handoff.run import RunLimits
from tests.runs import new_run


def test_former_owner_is_rejected_after_transfer() -> None:
    """After a transfer, the former owner's attempt to continue raises OwnershipError."""
    run = new_run(owner="coordinator")
    run.transfer_ownership("coordinator", "privacy")
    with pytest.raises(OwnershipError):
        run.check_owner("coordinator")
    run.check_owner("privacy")


def test_ownership_may_not_return_to_an_earlier_owner() -> None:
    """A path A -> B -> A is refused."""
    run = new_run(owner="a", limits=RunLimits(max_ownership_transfers=5))
    run.transfer_ownership("a", "b")
    with pytest.raises(OwnershipError) as caught:
        run.transfer_ownership("b", "a")
    assert caught.value.reason == "ownership_cycle"


def test_batch_that_does_not_fit_reserves_nothing() -> None:
    """A batch over the delegation budget is refused whole and leaves the count unchanged."""
    run = new_run(owner="c", limits=RunLimits(max_delegations=3))
    run.reserve_delegations("c", 2)
    with pytest.raises(BudgetExceeded):
        run.reserve_delegations("c", 2)
    assert run.delegations == 2


def test_only_the_owner_may_reserve() -> None:
    """A non-owner cannot spend the run's budget."""
    with pytest.raises(OwnershipError):
        new_run(owner="c").reserve_delegations("intruder", 1)
