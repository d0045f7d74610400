"""Which B-trees each commit writes: a run's commits, their pages counted by table and index.

In WAL mode SQLite appends every page a transaction changed to the write-ahead log, one
frame each, and marks a commit's last frame with the database's size. With the
checkpoints held off while requests run, the log keeps every frame of every commit, and
SQLite's ``dbstat`` table names the B-tree (a table, an index, or a table's own key)
each page belongs to. What this reads is the kernel's and the pager's share of a
request, which instructions (:mod:`bench.send_instructions`) do not see: every frame is
two ``pwrite64`` calls, and one more again at the checkpoint.

``python -m bench.commit_pages member [--count N]`` sends ``N`` blocking sends through
remote_risk's app in process (:mod:`bench.send_instructions`'s harness);
``python -m bench.commit_pages coordinator [--count N] [--concurrency C]`` makes ``N``
governed handoffs against remote_risk on loopback, ``C`` at a time. Either prints one JSON
line: the commits, the frames a commit, and each B-tree's frames a commit, largest first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import struct
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, cast

MEMBER, COORDINATOR = "member", "coordinator"
_WAL_HEADER, _FRAME_HEADER = 32, 24
_HELD = "wal_autocheckpoint=1000000"


def frames(wal: bytes) -> list[tuple[int, bool]]:
    """Each frame of a write-ahead log: its page number, and whether it ends a commit."""
    (page_size,) = struct.unpack(">I", wal[8:12])
    found, offset = [], _WAL_HEADER
    while offset + _FRAME_HEADER + page_size <= len(wal):
        page, size_after = struct.unpack(">II", wal[offset : offset + 8])
        found.append((page, size_after != 0))
        offset += _FRAME_HEADER + page_size
    return found


def page_owners(database: Path) -> dict[int, str]:
    """The B-tree each page of ``database`` (its log read too) belongs to."""
    connection = sqlite3.connect(database)
    try:
        return {page: name for name, page in connection.execute("SELECT name, pageno FROM dbstat")}
    finally:
        connection.close()


def by_tree(logged: Sequence[tuple[int, bool]], owners: dict[int, str]) -> dict[str, Any]:
    """The commits in ``logged``, their frames a commit, and each B-tree's."""
    commits = sum(1 for _, ends in logged if ends)
    if not commits:
        raise ValueError("the log holds no commit")
    trees = Counter(owners.get(page, "(free)") for page, _ in logged)
    return {
        "commits": commits,
        "frames_per_commit": round(len(logged) / commits, 2),
        "trees": {name: round(count / commits, 2) for name, count in trees.most_common()},
    }


def read(database: Path) -> dict[str, Any]:
    """:func:`by_tree` of ``database``'s log as it stands (read from copies of both)."""
    with tempfile.TemporaryDirectory(prefix="bench-commit-pages-") as directory:
        copy = Path(directory) / "copy.db"
        shutil.copy(database, copy)
        shutil.copy(f"{database}-wal", f"{copy}-wal")
        logged = frames(Path(f"{copy}-wal").read_bytes())
        return by_tree(logged, page_owners(copy))


def truncate_log(database: Path) -> None:
    """Checkpoint ``database`` and empty its log: what follows is the measured part."""
    connection = sqlite3.connect(database)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        connection.close()


@contextmanager
def checkpoints_held() -> Iterator[None]:
    """Connections opened meanwhile checkpoint only past a million pages."""
    from agent_cards.storage import engine

    kept = engine.WAL_PRAGMAS
    automatic = f"wal_autocheckpoint={engine.WAL_AUTOCHECKPOINT_PAGES}"
    engine.WAL_PRAGMAS = cast(Any, tuple(pragma.replace(automatic, _HELD) for pragma in kept))
    try:
        yield
    finally:
        engine.WAL_PRAGMAS = kept


def member(count: int, warm: int = 300) -> dict[str, Any]:
    """``warm`` sends, then ``count`` read, through remote_risk's app in process."""
    from bench import send_instructions as sends
    from member_kit.telemetry import logs

    with tempfile.TemporaryDirectory(prefix="bench-commit-pages-") as directory:
        root = Path(directory)
        sends.prepare(root, warm + count)
        document = json.loads((root / sends.SENDS_FILE).read_text())
        prepared = [(body.encode(), token) for body, token in document["sends"]]
        with checkpoints_held():
            app = sends.member_app(root, document["jwks"])
            try:
                return asyncio.run(_member_sends(app, root / "data", prepared, warm))
            finally:
                logs.reset()


async def _member_sends(
    app: Any, data: Path, prepared: Sequence[tuple[bytes, str]], warm: int
) -> dict[str, Any]:
    from bench import send_instructions as sends

    async with sends._running(app):
        for index, (body, token) in enumerate(prepared[:warm]):
            await sends.completed(app, body, token, index)
        [database] = data.glob("*.db")
        truncate_log(database)
        for index, (body, token) in enumerate(prepared[warm:], start=warm):
            await sends.completed(app, body, token, index)
        return read(database)


def coordinator(count: int, concurrency: int = 1, warm: int = 50) -> dict[str, Any]:
    """``warm`` governed handoffs, then ``count`` read, ``concurrency`` at a time."""
    from bench import services
    from coordinator import loop

    with (
        tempfile.TemporaryDirectory(prefix="bench-commit-pages-") as directory,
        ExitStack() as stack,
    ):
        root = Path(directory)
        issuer = services.Issuer.create(root)
        remote = stack.enter_context(services.remote_risk(root, issuer, capacity=100_000))
        stack.enter_context(checkpoints_held())
        work = _handoffs(
            remote.url, str(issuer.keys_dir), root / "coordinator", warm, count, concurrency
        )
        return loop.run(work)


async def _handoffs(
    url: str, keys_dir: str, root: Path, warm: int, count: int, concurrency: int
) -> dict[str, Any]:
    from agent_cards.keys import load_key_set
    from bench import governed
    from contracts.handoff import HandoffState
    from coordinator.remote.wire.client import A2AClient

    keys = load_key_set(keys_dir)
    ws = governed.workspace(root)
    try:
        async with A2AClient() as client:
            agent = await governed.register(client, ws, url, "remote-risk")

            async def one() -> None:
                outcome = await governed.handoff(client, agent, keys, ws)
                if outcome.record.state is not HandoffState.ACCEPTED:
                    raise RuntimeError(f"a handoff ended {outcome.record.state.value}")

            for _ in range(warm):
                await one()
            [database] = root.rglob("*.db")
            truncate_log(database)
            for _ in range(count // concurrency):
                await asyncio.gather(*(one() for _ in range(concurrency)))
            return read(database)
    finally:
        ws.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("side", choices=[MEMBER, COORDINATOR])
    parser.add_argument("--count", type=int, default=500, help="requests read")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="the coordinator's handoffs at once"
    )
    args = parser.parse_args(argv)
    if args.count < 1 or args.concurrency < 1 or args.count < args.concurrency:
        parser.error(
            "--count and --concurrency must be at least 1, and --count at least --concurrency"
        )
    if args.side == MEMBER:
        result = member(args.count)
    else:
        result = coordinator(args.count, args.concurrency)
    print(json.dumps({"side": args.side, **result}))


if __name__ == "__main__":
    main()
