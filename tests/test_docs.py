"""The README and docs/ say what the code does: every `federation ...` command in their
shell blocks is accepted by the CLI's own parser (and a `serve` command's options by the
service's parser), the CLI reference names every command, the operator-token bounds they
state are the code's, and the README's links reach a page and a heading that exist.

Nothing is run: the parsers are imported, as `federation` builds them, and fed the words.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from agent_cards.edge import token_strength
from coordinator.cli import parser as cli
from coordinator.cli.main import joined_values
from coordinator.service.http.server import build_serve_parser
from member_kit.guard.main import build_parser as build_guard_parser
from remote_risk.__main__ import build_parser as build_risk_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
README_MAX_LINES = 200

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELLS = {"sh", "bash", "shell", "console", ""}
# a paragraph about an operator's bearer token: the coordinator's, or remote_risk's
# audit or metrics token
ABOUT_TOKENS = re.compile(r"(?i)operator token|audit token|audit routes|_TOKEN\b")
AT_LEAST = re.compile(
    r"at\s+least\s+(\d+)(?:\s+random)?\s+characters|(\d+)\+\s+random\s+characters"
)
BETWEEN = re.compile(r"(\d+)\s+to\s+(\d+)\s+characters")
LINK = re.compile(r"\]\(([^)\s]+)\)")
SERVICE_PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "risk": build_risk_parser,
    "coordinator": build_serve_parser,
    "guard": build_guard_parser,
}


def shell_lines(text: str) -> Iterator[str]:
    """Each command line of the shell blocks in ``text``, continuations joined."""
    for language, body in FENCE.findall(text):
        if language in SHELLS:
            yield from body.replace("\\\n", " ").splitlines()


def federation_commands(path: Path) -> list[list[str]]:
    """The words after `federation` of every command line that runs it (the program
    may be `.venv/bin/federation`, after variables or `docker compose exec SERVICE`),
    up to a pipe, redirection or the line's end; comments dropped."""
    commands = []
    for line in shell_lines(path.read_text(encoding="utf-8")):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            words = list(lexer)
        except ValueError:  # an unbalanced quote: not a command line
            continue
        for index, word in enumerate(words):
            if word.rsplit("/", 1)[-1] == "federation" and not word.startswith("$"):
                rest = words[index + 1 :]
                stop = next((i for i, w in enumerate(rest) if set(w) <= set("|&;<>()")), None)
                commands.append(rest[:stop])
                break
    return commands


def parses(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace | str:
    """The namespace, or argparse's complaint (it exits; its message is kept)."""
    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint):
            return parser.parse_args(joined_values(words))
    except SystemExit:
        return complaint.getvalue().strip() or "exit"


ALL_COMMANDS = [(path.name, words) for path in PAGES for words in federation_commands(path)]


def test_the_pages_hold_commands_to_check() -> None:
    """The extraction finds the walk-through's commands (so the check below is not empty)."""
    readme = [words[:2] for words in federation_commands(README)]
    for expected in (["register", "http://127.0.0.1:8081"], ["runs", "--state"], ["cancel"]):
        assert any(words[: len(expected)] == expected for words in readme), expected
    assert len(ALL_COMMANDS) >= 40


@pytest.mark.parametrize(
    ("page", "words"), ALL_COMMANDS, ids=[f"{p}:{' '.join(w)[:50]}" for p, w in ALL_COMMANDS]
)
def test_every_documented_command_parses(page: str, words: list[str]) -> None:
    parsed = parses(cli.build_parser(), words)
    assert isinstance(parsed, argparse.Namespace), f"{page}: federation {' '.join(words)}: {parsed}"
    if parsed.command == "serve":
        service = SERVICE_PARSERS[parsed.service]()
        own = parses(service, parsed.service_args)
        assert isinstance(own, argparse.Namespace), f"{page}: {' '.join(words)}: {own}"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_the_cli_reference_names_every_command() -> None:
    """docs/cli.md's table has a row for every command and sub-command the parser has."""
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = [line for line in reference.splitlines() if line.startswith("| `federation ")]
    named = " ".join(rows)
    missing = []
    for name, command in _subcommands(cli.build_parser()).items():
        if not re.search(rf"`federation {name}\b", named):
            missing.append(name)
        has_subcommands = any(isinstance(a, argparse._SubParsersAction) for a in command._actions)
        for sub in _subcommands(command) if has_subcommands else {}:
            if not re.search(rf"`(federation )?{name} {sub}\b", named):
                missing.append(f"{name} {sub}")
    assert not missing, missing


def _token_paragraphs(text: str) -> list[str]:
    paragraphs = re.split(r"\n\s*\n|\n(?=\|)", text)
    return [p for p in paragraphs if ABOUT_TOKENS.search(p)]


def test_operator_token_bounds_are_the_codes() -> None:
    """Every stated bound on an operator token's length is the one the code enforces, and
    the README, Operations, Limits and compose.yaml each state it."""
    least, most = token_strength.MIN_TOKEN_CHARS, token_strength.MAX_TOKEN_CHARS
    files = [*PAGES, ROOT / "compose.yaml"]
    stated: dict[str, list[tuple[int, ...]]] = {}
    for path in files:
        for paragraph in _token_paragraphs(path.read_text(encoding="utf-8")):
            for match in AT_LEAST.finditer(paragraph):
                stated.setdefault(path.name, []).append((int(match[1] or match[2]),))
            for match in BETWEEN.finditer(paragraph):
                stated.setdefault(path.name, []).append((int(match[1]), int(match[2])))
    wrong = {
        name: bounds
        for name, bounds in stated.items()
        if any(b not in {(least,), (least, most)} for b in bounds)
    }
    assert not wrong, f"operator tokens are {least} to {most} characters: {wrong}"
    for name in ("README.md", "operations.md", "limits.md", "compose.yaml"):
        assert name in stated, name


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    headings = re.findall(r"^#{1,6} (.+?)\s*$", text, re.MULTILINE)
    return {slugify(heading, "-") for heading in headings}


def test_readme_links_reach_pages_and_headings() -> None:
    """A link from the README to a file reaches one, and its #anchor a heading there (the
    site's build checks the links between docs/ pages)."""
    broken = []
    for target in LINK.findall(README.read_text(encoding="utf-8")):
        if re.match(r"\w+:", target):
            continue
        path, _, anchor = target.partition("#")
        page = (ROOT / path) if path else README
        if not page.exists():
            broken.append(target)
            continue
        if anchor and page.suffix == ".md" and anchor not in _anchors(page):
            broken.append(target)
    assert not broken, broken


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)


def test_every_page_is_in_the_site() -> None:
    """Each docs/ page is in mkdocs.yml's navigation (the build also warns, and fails)."""
    import yaml

    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    site = yaml.safe_load(config)

    def pages(node: object) -> Iterator[str]:
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from pages(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from pages(value)

    assert {path.name for path in DOCS} == set(pages(site["nav"]))
    assert site["theme"]["font"] is False  # no web fonts: the site works offline
    assert "social" not in str(site.get("plugins"))


# a path of this repository named in backquotes: `member_kit/server/authorization/hook.py`
REPO_PATH = re.compile(
    r"`((?:agent_cards|bench|contracts|coordinator|docs|examples|member_kit|remote_risk|tests)"
    r"/[\w./-]*\w)(?:::\w+)?`"
)
# named, but not files of this repository's tree
NOT_OURS = {
    "bench/results.json": "written by `make bench`, ignored by git",
    "docs/specification.md": "the A2A repository's specification",
}


def test_every_named_file_exists() -> None:
    """A file or folder of the repository that a page names in code exists."""
    missing = [
        f"{page.name}: {name}"
        for page in PAGES
        for name in REPO_PATH.findall(page.read_text(encoding="utf-8"))
        if not (ROOT / name).exists() and name not in NOT_OURS
    ]
    assert not missing, missing


def test_no_page_says_a_token_is_for_a_url() -> None:
    """A delegation token's audience is the agent's key identity (RFC 9278 thumbprint URI),
    never a URL from its card."""
    said = re.compile(r"(?is)audience[^.]{0,80}\bis\b[^.]{0,80}(?:JSON-RPC URL|card's URL)")
    wrong = [page.name for page in PAGES if said.search(page.read_text(encoding="utf-8"))]
    assert not wrong, wrong


def test_compose_paths_stay_in_the_compose_page() -> None:
    """A command outside the compose page uses no compose secret's path (the metrics example
    once read `secrets/operator_token` where the coordinator was started by hand)."""
    wrong = [
        f"{page.name}: {line.strip()}"
        for page in PAGES
        if page.name != "compose.md"
        for line in shell_lines(page.read_text(encoding="utf-8"))
        if "secrets/" in line.split("#", 1)[0]
    ]
    assert not wrong, wrong


def test_make_demo_keeps_its_runs_in_one_place_it_replaces() -> None:
    """``make demo`` left a new throwaway directory behind at every run: it now works in
    ``.demo/`` (ignored by git), removed first, as the README's state table says."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "rm -rf .demo" in recipe and "--data-dir .demo demo" in recipe
    assert ".demo/" in (ROOT / ".gitignore").read_text().splitlines()
    assert "`.demo/`" in README.read_text()
