"""A2A v0.3 agents as targets: their card, their JSON-RPC shapes, their transport.

Everything v0.3 is translated at this boundary into the v1.0 wire models the rest of the
coordinator uses, so the driver, the state map and return admission stay one.
"""

__all__: list[str] = []
