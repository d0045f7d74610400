"""The guard: a sidecar in front of an unmodified A2A agent, built on the kit.

It serves the upstream agent's card rewritten to point at itself (the delegation scheme,
per-skill scopes, the receipts extension, its own signature), checks every delegation
token with the kit's authorizer, forwards what is allowed to the upstream over JSON-RPC,
binds each task it sees opened to the handoff and token that opened it, signs a receipt
over every terminal task the upstream returns, and keeps the kit's decision log and
audit routes. ``federation serve guard --upstream URL`` runs it (:mod:`.main`).
"""

__all__: list[str] = []
