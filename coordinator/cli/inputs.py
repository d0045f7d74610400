"""What a command reads besides its options: a strict JSON object from a file or standard
input, a secret's first line, and the API's request document its arguments make."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent_cards.edge.errors import JSONShapeError
from agent_cards.edge.json_shape import check_json_shape
from contracts import strict_json
from coordinator.errors import UsageError, describe_validation

if TYPE_CHECKING:  # pydantic is imported by the command that builds a request (start-up time)
    import pydantic

R = TypeVar("R", bound="pydantic.BaseModel")


def read_object(path: Path, what: str) -> dict[str, Any]:
    """A strict JSON object from ``path`` (``-``: standard input); ``what`` prefixes the
    reason codes (``input_unreadable``, ``input_not_json``, ``input_not_object``). It is
    held to the rule the API's edge holds a body to (one spelling, depth, I-JSON numbers:
    ``json_number_out_of_range`` and the others of :mod:`agent_cards.edge.json_shape`)."""
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
        check_json_shape(raw, max_depth=strict_json.MAX_DEPTH)
        value = strict_json.loads(raw)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", f"{what}_unreadable") from None
    except JSONShapeError as exc:
        raise UsageError(f"{path}: {exc}", exc.reason) from None
    except ValueError as exc:
        raise UsageError(f"{path} is not strict JSON: {exc}", f"{what}_not_json") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path} must hold a JSON object", f"{what}_not_object")
    return value


def request(model: type[R], **fields: Any) -> R:
    """The API's request document from the command's arguments; bad values are usage
    errors (``--timeout -5`` is refused here, before anything is recorded)."""
    import pydantic

    try:
        return model(**fields)
    except pydantic.ValidationError as exc:
        raise UsageError(describe_validation(exc), "bad_argument") from None


def registration_schemas(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``--return-schema SKILL=FILE`` values as ``{skill: schema}``."""
    schemas: dict[str, dict[str, Any]] = {}
    for value in args.return_schema:
        skill, sep, file = value.partition("=")
        if not sep or not skill or not file:
            raise UsageError(
                f"--return-schema takes SKILL=FILE, not {value!r}", "return_schema_option"
            )
        schemas[skill] = read_object(Path(file), "return_schema")
    return schemas


def delegation_schema(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``--return-schema FILE`` of a delegation, or None."""
    if args.return_schema is None:
        return None
    return read_object(args.return_schema, "return_schema")


def read_secret(path: Path) -> str:
    """The first line of ``path`` (``-``: standard input), without its line end."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"cannot read {path}: {exc.__class__.__name__}", "token_unreadable"
        ) from None
    lines = text.splitlines()
    return lines[0] if lines else ""
