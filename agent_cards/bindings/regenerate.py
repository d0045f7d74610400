"""Regenerate the Python protobuf and gRPC modules from the checked-in ``a2a.proto``.

``python -m agent_cards.bindings.regenerate`` writes ``a2a_pb2.py``, ``a2a_pb2.pyi`` and
``a2a_pb2_grpc.py`` into :mod:`agent_cards.bindings.grpc`; ``--check`` writes nothing and
exits 1 when the checked-in modules differ from a fresh generation. It needs grpcio-tools
(a test dependency) and googleapis-common-protos, which ships Google's API ``.proto`` files.

protoc's output is post-processed in two ways: the descriptors build into the package's
private pool (:mod:`agent_cards.bindings.grpc.pool`) instead of protobuf's default pool,
and the gRPC module imports its messages from this package rather than a top-level
``a2a_pb2``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

__all__ = ["generate", "main"]

PACKAGE = "agent_cards.bindings.grpc"
TARGET = Path(__file__).resolve().parent / "grpc"
PROTO = "a2a.proto"
OUTPUTS = ("a2a_pb2.py", "a2a_pb2.pyi", "a2a_pb2_grpc.py")
_HEADER = (
    "# Generated from a2a.proto by `python -m agent_cards.bindings.regenerate`. Do not edit.\n"
)
_REWRITES = {
    "a2a_pb2.py": (
        (
            "from google.protobuf import descriptor_pool as _descriptor_pool\n",
            f"from {PACKAGE}.pool import POOL as _POOL\n",
        ),
        ("_descriptor_pool.Default().AddSerializedFile(", "_POOL.AddSerializedFile("),
    ),
    "a2a_pb2_grpc.py": (
        ("import a2a_pb2 as a2a__pb2\n", f"from {PACKAGE} import a2a_pb2 as a2a__pb2\n"),
    ),
    "a2a_pb2.pyi": (),
}


def _include_dirs() -> list[str]:
    import google.api
    import grpc_tools

    api_protos = Path(next(iter(google.api.__path__))).parent.parent
    well_known = Path(str(resources.files(grpc_tools) / "_proto"))
    return [str(TARGET), str(api_protos), str(well_known)]


def _protoc(out: Path) -> None:
    from grpc_tools import protoc

    arguments = [
        "grpc_tools.protoc",
        *(f"-I{directory}" for directory in _include_dirs()),
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        PROTO,
    ]
    if protoc.main(arguments) != 0:
        raise SystemExit(f"protoc failed on {PROTO}")


def _post_process(name: str, text: str) -> str:
    for old, new in _REWRITES[name]:
        if old not in text:
            raise SystemExit(f"{name}: protoc's output changed; expected {old!r}")
        text = text.replace(old, new)
    return _HEADER + text


def generate() -> dict[str, str]:
    """The modules a fresh generation produces, by file name."""
    with tempfile.TemporaryDirectory() as scratch:
        _protoc(Path(scratch))
        return {
            name: _post_process(name, (Path(scratch) / name).read_text(encoding="utf-8"))
            for name in OUTPUTS
        }


def stale() -> list[str]:
    """The checked-in modules that differ from a fresh generation."""
    fresh = generate()
    return [
        name
        for name, text in fresh.items()
        if not (TARGET / name).exists() or (TARGET / name).read_text(encoding="utf-8") != text
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_cards.bindings.regenerate")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    options = parser.parse_args(argv)
    if options.check:
        differing = stale()
        for name in differing:
            print(f"{PACKAGE}/{name} is stale; run python -m agent_cards.bindings.regenerate")
        return 1 if differing else 0
    for name, text in generate().items():
        (TARGET / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
