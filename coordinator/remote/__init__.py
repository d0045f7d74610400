"""Talking A2A v1.0 to another team's agent.

``client`` (JSON-RPC over httpx, with limits), ``streaming`` (SSE updates),
``registry`` (verified, pinned agent cards), ``push`` (the push-notification receiver).
"""

from coordinator.remote.client import A2AClient
from coordinator.remote.registry import RegisteredAgent, Registry, TrustAnchor

__all__ = ["A2AClient", "RegisteredAgent", "Registry", "TrustAnchor"]
