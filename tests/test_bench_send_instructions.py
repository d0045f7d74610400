"""bench.send_instructions: the sends it counts are real, completed ones."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench import send_instructions


def test_every_prepared_send_is_completed_by_the_member(tmp_path: Path) -> None:
    send_instructions.prepare(tmp_path, 4)

    assert asyncio.run(send_instructions.drive(tmp_path, warm=1, count=3)) == 4


def _forge(root: Path, sends: int, index: int) -> None:
    """``sends`` prepared sends, the token of send ``index`` with a forged signature."""
    send_instructions.prepare(root, sends)
    sends_file = root / send_instructions.SENDS_FILE
    document = json.loads(sends_file.read_text())
    header, payload, signature = document["sends"][index][1].split(".")
    document["sends"][index][1] = f"{header}.{payload}.{signature[::-1]}"
    sends_file.write_text(json.dumps(document))


def test_a_send_the_member_refuses_fails_the_run(tmp_path: Path) -> None:
    _forge(tmp_path, 3, 1)

    with pytest.raises(RuntimeError, match="send 1 was not completed"):
        asyncio.run(send_instructions.drive(tmp_path, warm=0, count=3))


def test_the_count_is_read_from_callgrinds_summary() -> None:
    summary = "==41== Events    : Ir\n==41== Collected : 5358681688\n==41==\n"

    assert send_instructions.instructions(summary) == 5358681688
    with pytest.raises(RuntimeError, match="no count"):
        send_instructions.instructions("==41== valgrind: failed to start tool\n")


def test_the_a2a_sdk_server_completes_the_same_sends(tmp_path: Path) -> None:
    send_instructions.prepare(tmp_path, 3)

    assert asyncio.run(send_instructions.drive(tmp_path, 1, 2, send_instructions.SDK)) == 3


def test_the_member_floor_completes_the_same_sends(tmp_path: Path) -> None:
    send_instructions.prepare(tmp_path, 3)

    assert asyncio.run(send_instructions.drive(tmp_path, 1, 2, send_instructions.FLOOR)) == 3


def test_a_send_the_member_floor_refuses_fails_the_run(tmp_path: Path) -> None:
    _forge(tmp_path, 2, 0)

    with pytest.raises(RuntimeError, match="send 0 was not completed"):
        asyncio.run(send_instructions.drive(tmp_path, 0, 2, send_instructions.FLOOR))
