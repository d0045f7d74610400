"""Talking A2A v1.0 to another team's agent.

``client`` (JSON-RPC over httpx, with limits), ``streaming`` (SSE updates),
``registry`` (verified, pinned agent cards), ``push`` (the push-notification receiver).
"""

__all__: list[str] = []
