"""The gRPC port's front door: connections admitted per client address, as on HTTP.

gRPC core counts connections but not clients, and offers no hook where a server could
look at a connection before taking it: one address that opens ``max_connections`` silent
connections holds the whole port. So the public port is ours. :class:`GRPCFront`
accepts each connection itself and admits it through a
:class:`~agent_cards.edge.protocol.ConnectionGate`, the same count the HTTP edge keeps
(``max_connections_per_client`` from one address, ``max_connections`` in all). A
connection past either is sent an HTTP/2 GOAWAY (``ENHANCE_YOUR_CALM``, the reason as
its debug data, so a client sees why) and closed at once; it is counted (the service's
``refused`` callback, by reason) and logged at a bounded rate. An admitted
connection is relayed, byte for byte, to the gRPC server listening on a loopback port of
its own; gRPC's own limits (handshake time, idle time, streams per connection, message
size: :mod:`agent_cards.edge.grpc_limits`) still hold on it, and when gRPC closes it, so
does the front.

The gRPC server then sees the relay as its peer; :meth:`GRPCFront.client_of` answers the
client address a relayed connection stands for, so that calls in flight are still
counted per client, and a call on a connection that did not come through the front (a
local process dialling the private port) stands for no client at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Callable

from agent_cards.edge.limits import EdgeLimits
from agent_cards.edge.protocol import ConnectionGate
from agent_cards.edge.rate_limited_log import RateLimitedLog

logger = logging.getLogger("agent_cards.edge")

RELAY_CHUNK_BYTES = 64 * 1024
# RFC 9113: an empty SETTINGS frame (the server preface), then GOAWAY (type 7) naming no
# stream, with ENHANCE_YOUR_CALM (0xb) and the reason as debug data.
_SETTINGS = bytes.fromhex("000000040000000000")
_GOAWAY, _ENHANCE_YOUR_CALM = 0x7, 0xB


def goaway(reason: str) -> bytes:
    """The bytes that refuse an HTTP/2 connection for ``reason``."""
    payload = struct.pack(">II", 0, _ENHANCE_YOUR_CALM) + reason.encode("ascii")
    header = struct.pack(">I", len(payload))[1:] + bytes([_GOAWAY, 0]) + struct.pack(">I", 0)
    return _SETTINGS + header + payload


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` as ``(host, port)``."""
    host, _, port = address.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


class GRPCFront:
    """Listen on ``address``; admit per client; relay to the gRPC server at ``backend``."""

    def __init__(
        self,
        limits: EdgeLimits,
        address: str,
        backend: tuple[str, int],
        refused: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self._gate = ConnectionGate(limits)
        self._count_refusal = refused
        self._address = split_address(address)
        self._backend = backend
        self._clients: dict[tuple[str, int], str] = {}
        self._refusals = RateLimitedLog(logger)
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        host, port = self._address
        self._server = await asyncio.start_server(self._accepted, host, port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for pump in list(self._pumps):
                pump.cancel()  # its relay then closes both ends and returns
            await self._server.wait_closed()
            self._server = None

    def client_of(self, relay_end: tuple[str, int]) -> str | None:
        """The client address the relay's connection from ``relay_end`` stands for."""
        return self._clients.get(relay_end)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if peer else ""
        refused = self._gate.admit(client)
        if refused is not None:
            await self._refuse(writer, client, refused)
            return
        try:
            await self._relay(reader, writer, client)
        finally:
            self._gate.release(client)

    async def _refuse(self, writer: asyncio.StreamWriter, client: str, reason: str) -> None:
        self._count_refusal(reason)
        self._refusals.log(
            logging.WARNING, reason, "gRPC connection from %s refused: %s", client, reason
        )
        with contextlib.suppress(OSError):
            writer.write(goaway(reason))
            writer.close()
            await writer.wait_closed()

    async def _relay(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: str
    ) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._backend)
        except OSError as exc:
            logger.warning("gRPC connection from %s dropped: the gRPC server: %s", client, exc)
            writer.close()
            return
        host, port = up_writer.get_extra_info("sockname")[:2]
        end = (str(host), int(port))
        self._clients[end] = client
        pumps = {
            asyncio.create_task(_pump(reader, up_writer)),
            asyncio.create_task(_pump(up_reader, writer)),
        }
        self._pumps |= pumps
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            self._pumps -= pumps
            del self._clients[end]
            for stream in (up_writer, writer):
                stream.close()


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy ``source`` to ``sink`` until either end closes."""
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while chunk := await source.read(RELAY_CHUNK_BYTES):
            sink.write(chunk)
            await sink.drain()
