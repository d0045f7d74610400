"""Who a remote agent is: its Agent Card fetched and verified against the keys the
operator pinned for it, the registry that keeps it, a changed card held for review, a key
that succeeds a pinned one, and the operator's audit credentials for the agent."""

__all__: list[str] = []
