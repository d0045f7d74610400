"""A PostgreSQL link that loses the answer to one COMMIT: its outcome unknown to the client.

TEST FIXTURE. A loopback TCP forwarder in front of PostgreSQL. Armed with a marker (bytes
that a statement of the transaction to cut carries, a table's name say), it watches each
client connection: once the client has sent the marker, the next ``COMMIT`` it sends as a
simple query is forwarded and the server commits; its answer is read and dropped, and
both ends are closed. The client sees its connection lost at COMMIT, not knowing whether
it committed (it did), as a network cut or a crash of the link at that instant looks from
outside. Every other byte passes unchanged; one cut per arming.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest
from sqlalchemy import make_url

# A simple-query message: 'Q', its length (4 + the text with its NUL), the text
COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"


class CommitCut:
    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self.cuts = 0

    def arm(self, marker: bytes) -> None:
        """Cut the next COMMIT of a connection that sent ``marker`` in its transaction."""
        with self._lock:
            self._marker = marker

    def _take(self) -> bool:
        with self._lock:
            if self._marker is None:
                return False
            self._marker = None
            self.cuts += 1
            return True

    def serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._link, args=(client,), daemon=True).start()

    def _link(self, client: socket.socket) -> None:
        server = socket.create_connection(self._target)
        dropping = threading.Event()
        back = threading.Thread(target=_answers, args=(server, client, dropping), daemon=True)
        back.start()
        seen = False
        with suppress(OSError):
            while data := client.recv(65536):
                marker = self._marker
                seen = seen or (marker is not None and marker in data)
                if seen and COMMIT in data and self._take():
                    dropping.set()  # the answer to this COMMIT never reaches the client
                    server.sendall(data)
                    return
                if COMMIT in data:
                    seen = False
                server.sendall(data)
        _close(client, server)

    def close(self) -> None:
        self._listener.close()


def _answers(server: socket.socket, client: socket.socket, dropping: threading.Event) -> None:
    """The server's bytes to the client, until the cut: then its answer is dropped."""
    with suppress(OSError):
        while data := server.recv(65536):
            if dropping.is_set():
                break
            client.sendall(data)
    _close(client, server)


def _close(*sockets: socket.socket) -> None:
    for each in sockets:
        with suppress(OSError):
            each.shutdown(socket.SHUT_RDWR)
        each.close()


@contextmanager
def commit_cut(host: str, port: int) -> Iterator[CommitCut]:
    """A :class:`CommitCut` in front of the PostgreSQL at ``host:port``."""
    cut = CommitCut((host, port))
    threading.Thread(target=cut.serve, daemon=True).start()
    try:
        yield cut
    finally:
        cut.close()


@contextmanager
def through_a_cut(url: str) -> Iterator[tuple[str, CommitCut]]:
    """The PostgreSQL of ``url`` reached through a :class:`CommitCut`: the URL to use, and
    the cut."""
    target = make_url(url)
    with commit_cut(target.host or "127.0.0.1", target.port or 5432) as cut:
        yield target.set(host="127.0.0.1", port=cut.port).render_as_string(False), cut


@pytest.fixture
def cut_link(postgres_url: str) -> Iterator[tuple[str, CommitCut]]:
    """The test's PostgreSQL URL (its module imports ``postgres_url``), through a link that
    can lose a COMMIT's answer: the URL to use, and the cut."""
    with through_a_cut(postgres_url) as found:
        yield found
