"""The command line's return-contract options, read the same way locally and with --server.

``federation register ... --return-schema SKILL=FILE`` declares a JSON Schema (Draft 2020-12)
for a skill's returns, ``--return-finding SKILL`` declares that a skill answers with our
Finding contract; ``federation delegate --return-schema FILE`` gives one delegation its own
schema. The files are read here, on the caller's machine; what they hold is judged by
:mod:`coordinator.handoff.declared`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from contracts import strict_json
from coordinator.errors import UsageError


def add_register_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--return-schema",
        action="append",
        default=[],
        metavar="SKILL=FILE",
        help="admit this skill's returns only if they match the JSON Schema in FILE",
    )
    parser.add_argument(
        "--return-finding",
        action="append",
        default=[],
        metavar="SKILL",
        help="this skill answers with one Finding citing only the records sent to it",
    )


def add_delegate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--return-schema",
        type=Path,
        metavar="FILE",
        help="admit the return only if it matches this JSON Schema (default: the skill's "
        "declared contract; with none, nothing returned is admitted)",
    )


def registration_schemas(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``--return-schema SKILL=FILE`` values as ``{skill: schema}``."""
    schemas: dict[str, dict[str, Any]] = {}
    for value in args.return_schema:
        skill, sep, file = value.partition("=")
        if not sep or not skill or not file:
            raise UsageError(
                f"--return-schema takes SKILL=FILE, not {value!r}", "return_schema_option"
            )
        schemas[skill] = read_schema(Path(file))
    return schemas


def delegation_schema(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``--return-schema FILE`` of a delegation, or None."""
    return None if args.return_schema is None else read_schema(args.return_schema)


def read_schema(path: Path) -> dict[str, Any]:
    try:
        value = strict_json.loads(path.read_bytes())
    except OSError as exc:
        raise UsageError(
            f"cannot read {path}: {exc.strerror}", "return_schema_unreadable"
        ) from None
    except ValueError as exc:
        raise UsageError(f"{path} is not strict JSON: {exc}", "return_schema_not_json") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: a return schema must be a JSON object", "return_schema_invalid")
    return value
