"""Talking A2A v1.0 to another team's agent.

``wire`` (the A2A client and the bindings a request travels by), ``http`` (HTTP/1.1
read under the client's caps, and its keep-alive pool), ``cards`` (who an agent is: its
card verified against the keys pinned for it, its registration), ``streaming`` (following
a remote task by its updates), ``push`` (the push-notification receiver).
"""

__all__: list[str] = []
