"""How long and how much the A2A client is willing to wait for and read.

The timeouts, the caps on a response and on a stream, the connections of the pool and
how many long-lived streams may hold, the poll budget and how long an idle gRPC channel
stays connected; one immutable value given to :class:`~coordinator.remote.wire.client.A2AClient`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClientLimits:
    """How long and how much the client is willing to wait for and read."""

    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    total_timeout: float = 60.0
    max_response_bytes: int = 1_000_000
    max_stream_bytes: int = 8_000_000
    # Connections in the pool, and how many of them long-lived update streams may hold,
    # so that sends and polls always find a free connection. A handoff to a streaming
    # agent holds one stream for its whole life; beyond max_streams handoffs poll.
    max_connections: int = 64
    max_streams: int = 32
    # How many GetTask polls a second all the tasks this client follows may cost together;
    # with many tasks in flight each one polls less often instead of the client drowning.
    max_polls_per_second: float = 200.0
    # A gRPC channel with no call in flight for this long drops its connection and stops
    # reconnecting until the next call (gRPC's own default is 30 minutes), so a channel
    # to an agent removed or re-registered elsewhere holds nothing open for long.
    idle_channel_seconds: float = 30.0

    @property
    def max_requests(self) -> int:
        """Plain requests in flight at once: the connections streams can never take."""
        return max(1, self.max_connections - self.max_streams)
