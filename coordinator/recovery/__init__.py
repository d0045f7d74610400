"""Nothing in flight is lost: recovery after a stop, and workers that drive handoffs.

``recover`` (claim and finish what a stopped coordinator left), ``worker`` (drive
handoffs from the shared database until stopped).
"""

__all__: list[str] = []
