"""The command line's return-contract options, read the same way locally and with --server.

``federation register ... --return-schema SKILL=FILE`` declares a JSON Schema (Draft 2020-12)
for a skill's returns, ``--return-finding SKILL`` declares that a skill answers with our
Finding contract; ``federation delegate --return-schema FILE`` gives one delegation its own
schema. The files are read on the caller's machine (:mod:`coordinator.cli.inputs`); what
they hold is judged by :mod:`coordinator.handoff.declared`. This module imports only
argparse, as the parser must.
"""

from __future__ import annotations

import argparse
from pathlib import Path


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
