"""The HTTP edge's connection limits, as a gRPC server takes them.

A ``grpc.aio`` server left at its defaults holds a connection that never completes the
HTTP/2 handshake for 120 seconds, an idle one for ever, and any number of them. From the
same :class:`~agent_cards.edge.limits.EdgeLimits` as the HTTP edge, :func:`server_options`
gives it:

* ``grpc.max_allowed_incoming_connections``: ``max_connections`` open in total;
* ``grpc.server_handshake_timeout_ms``: ``header_timeout_seconds`` for a new connection
  to finish its handshake (the HTTP edge's time to the end of the headers);
* ``grpc.max_connection_idle_ms``: ``keep_alive_seconds`` without a call, then GOAWAY
  (the HTTP edge's keep-alive);
* ``grpc.max_concurrent_streams``: calls in flight on one connection, at most
  ``max_connections_per_client``;
* ``grpc.max_receive_message_length``: ``max_body_bytes`` for one message;
* keepalive pings: answered, but a client that pings without calls more often than
  every ``keep_alive_seconds`` is sent GOAWAY.

gRPC core counts connections, not clients, so the per-client bound on connections is
kept in front of it (:mod:`agent_cards.edge.grpc_front`), and on calls by a
:class:`~agent_cards.edge.protocol.ConnectionGate` admitting each call against
``max_connections_per_client`` calls in flight from one client address
(``too_many_client_connections``) and ``max_connections`` in all.
"""

from __future__ import annotations

from agent_cards.edge.limits import EdgeLimits


def server_options(limits: EdgeLimits) -> list[tuple[str, int]]:
    """The ``grpc.aio.server(options=...)`` that hold it to ``limits``."""
    keep_alive_ms = int(limits.keep_alive_seconds * 1000)
    return [
        ("grpc.max_receive_message_length", limits.max_body_bytes),
        # call metadata held to the HTTP edge's header cap, one cap with no random band
        # (gRPC's own defaults refuse at random from 8 KiB, below the token size cap, so a
        # long token would be refused without its reason, token_too_large)
        ("grpc.max_metadata_size", limits.max_header_bytes),
        ("grpc.absolute_max_metadata_size", limits.max_header_bytes),
        ("grpc.max_allowed_incoming_connections", limits.max_connections),
        ("grpc.server_handshake_timeout_ms", int(limits.header_timeout_seconds * 1000)),
        ("grpc.max_connection_idle_ms", keep_alive_ms),
        ("grpc.max_concurrent_streams", limits.max_connections_per_client),
        ("grpc.http2.min_ping_interval_without_data_ms", keep_alive_ms),
        ("grpc.http2.max_ping_strikes", 2),
    ]


def peer_address(peer: str) -> tuple[str, int] | None:
    """The ``(host, port)`` of a gRPC peer string, or None when it names none."""
    host = peer_host(peer)
    port = peer.rpartition(":")[2]
    if host == peer or not port.isdigit():
        return None
    return host, int(port)


def peer_host(peer: str) -> str:
    """The client address of a gRPC peer string (``ipv4:127.0.0.1:5000``,
    ``ipv6:[::1]:5000``); the whole string when it is neither."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1:].partition("]")[0]
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    return peer
