"""A run and its handoffs, as pure rules over records.

``run`` (the run: owner, budget, its book; the one way a run starts), ``book`` (every
handoff's record and transitions), ``envelope`` (the budget ledger's arithmetic: what is
left, how a handoff's envelope settles), ``admission`` (the predicates a proposal must pass),
``state_map`` (remote task states to handoff states), ``projection`` (which context a
specialist may see), ``returns`` (return admission of what comes back, by the handoff's
return contract), ``declared`` (return contracts as an operator declares them).
"""

__all__: list[str] = []
