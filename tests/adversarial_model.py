"""A hostile OpenAI-compatible server for tests: raw HTTP on loopback, every byte scripted.

Unlike :mod:`tests.model_server` (a well-behaved FastAPI app), this server writes the
status line, headers and body itself, so a test can send what a broken or malicious
service would: a body that is not JSON under ``Content-Type: application/json``,
``{"choices": [null]}``, one byte every second after the headers, 20 MB, a gzip bomb, or
nothing at all for a minute. Each ``POST`` takes the next :class:`Reply`; beyond the
script the answer is HTTP 500. Every request body received is kept in ``requests``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from coordinator.assessment.model_gateway import ModelConfig
from remote_risk.risk import model as risk_model
from tests.model_server import MODEL_ID, PLACEHOLDER_KEY, completion
from tests.servers import START_SECONDS

JSON_HEADERS = (("Content-Type", "application/json"),)


@dataclass(frozen=True)
class Reply:
    """One scripted answer, written exactly as given."""

    body: bytes
    status: int = 200
    headers: tuple[tuple[str, str], ...] = JSON_HEADERS
    # Seconds between single bytes of the body (0: the body in one write).
    drip_seconds: float = 0.0
    # Seconds to wait before the status line (a hung model).
    hang_seconds: float = 0.0
    # Send Content-Length (otherwise the body ends when the connection closes).
    content_length: bool = True


def json_reply(value: Any, **options: Any) -> Reply:
    return Reply(json.dumps(value).encode(), **options)


def answer_reply(content: str, **options: Any) -> Reply:
    """A well-formed chat completion whose text is ``content``."""
    return json_reply(completion(content=content), **options)


def broken_json() -> Reply:
    return Reply(b'{"id": "chatcmpl-1", "choices": [{"message": {"content": "ok"')


def null_choice() -> Reply:
    return json_reply({**completion(content="x"), "choices": [None]})


def null_message() -> Reply:
    body = completion(content="x")
    body["choices"][0]["message"] = None
    return json_reply(body)


def drip(seconds: float = 1.0) -> Reply:
    """A valid reply, one byte per ``seconds`` after the headers."""
    return answer_reply('{"status": "ok"}', drip_seconds=seconds)


def huge(megabytes: int = 20) -> Reply:
    """A valid chat completion whose content is ``megabytes`` MB of text."""
    return answer_reply("A" * (megabytes * 1_000_000))


def hung(seconds: float = 60.0) -> Reply:
    return answer_reply('{"status": "ok"}', hang_seconds=seconds)


@cache
def _bomb_body(decoded_megabytes: int) -> bytes:
    head = json.dumps(completion(content="@@")).encode().split(b"@@")
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(head[0])]
    block = b"A" * 1_000_000
    parts.extend(compressor.compress(block) for _ in range(decoded_megabytes))
    parts.extend([compressor.compress(head[1]), compressor.flush()])
    return b"".join(parts)


def gzip_bomb(decoded_megabytes: int = 200) -> Reply:
    """A small gzip body (about 200 KB) that decodes to ``decoded_megabytes`` MB."""
    headers = (*JSON_HEADERS, ("Content-Encoding", "gzip"))
    return Reply(_bomb_body(decoded_megabytes), headers=headers)


def gzipped(reply: Reply) -> Reply:
    """``reply`` compressed, as a server ignoring Accept-Encoding: identity might send it."""
    headers = (*reply.headers, ("Content-Encoding", "gzip"))
    return Reply(gzip.compress(reply.body), reply.status, headers)


_REASONS = {200: "OK", 500: "Internal Server Error", 503: "Service Unavailable"}


Responder = Callable[[dict[str, Any]], Reply]


@dataclass
class AdversarialModel:
    """The server's state: the script (or a responder choosing by request) and what came in."""

    script: list[Reply]
    responder: Responder | None = None
    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    request_headers: list[dict[str, str]] = field(default_factory=list)

    def next_reply(self, request: dict[str, Any]) -> Reply:
        if self.responder is not None:
            return self.responder(request)
        if self.script:
            return self.script.pop(0)
        return json_reply({"error": {"message": "script exhausted"}}, status=500)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # CancelledError: the server is stopping; end quietly rather than as a cancelled task.
        with contextlib.suppress(
            ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError
        ):
            while await self._one_exchange(reader, writer):
                pass
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    async def _one_exchange(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.request_headers.append(headers)
        request: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            request = json.loads(body)
        self.requests.append(request)
        reply = self.next_reply(request)
        await self._write(reply, writer)
        return False  # one exchange per connection: "Connection: close"

    async def _write(self, reply: Reply, writer: asyncio.StreamWriter) -> None:
        if reply.hang_seconds:
            await asyncio.sleep(reply.hang_seconds)
        status = f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
        header_lines = [f"{name}: {value}\r\n" for name, value in reply.headers]
        if reply.content_length:
            header_lines.append(f"Content-Length: {len(reply.body)}\r\n")
        header_lines.append("Connection: close\r\n\r\n")
        writer.write((status + "".join(header_lines)).encode("latin-1"))
        await writer.drain()
        if not reply.drip_seconds:
            writer.write(reply.body)
            await writer.drain()
            return
        for index in range(len(reply.body)):
            writer.write(reply.body[index : index + 1])
            await writer.drain()
            await asyncio.sleep(reply.drip_seconds)

    def config(self, timeout_seconds: float = 10.0, **bounds: Any) -> ModelConfig:
        """The coordinator's model configuration for this server."""
        return ModelConfig(self.base_url, MODEL_ID, PLACEHOLDER_KEY, timeout_seconds, **bounds)

    def risk_config(self, timeout_seconds: float = 10.0, **bounds: Any) -> risk_model.ModelConfig:
        """remote_risk's own model configuration for this server."""
        return risk_model.ModelConfig(
            self.base_url, MODEL_ID, PLACEHOLDER_KEY, timeout_seconds, **bounds
        )

    def environment(self, prefix: str) -> dict[str, str]:
        """The ``PREFIX_*`` variables that point a service at this server."""
        return {
            f"{prefix}_BASE_URL": self.base_url,
            prefix: MODEL_ID,
            f"{prefix}_API_KEY": PLACEHOLDER_KEY,
        }


@contextlib.contextmanager
def adversarial_model(
    script: list[Reply] | None = None, responder: Responder | None = None
) -> Iterator[AdversarialModel]:
    """Serve ``script`` (or ``responder``) on 127.0.0.1 in a thread of its own."""
    model = AdversarialModel(list(script or ()), responder)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, asyncio.Server] = {}

    async def start() -> None:
        server = await asyncio.start_server(model.handle, "127.0.0.1", 0)
        holder["server"] = server
        port = server.sockets[0].getsockname()[1]
        model.base_url = f"http://127.0.0.1:{port}/v1"
        ready.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    if not ready.wait(START_SECONDS):
        raise RuntimeError("the adversarial model server did not start")
    try:
        yield model
    finally:
        loop.call_soon_threadsafe(holder["server"].close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
