"""The members the token-attack suite holds to the same refusals.

``remote_risk`` (the risk team's member, :mod:`remote_risk.service`), ``terms`` (the
legal team's member, built on the kit in one file: ``examples/terms_member.py``, loaded
here by path since ``examples/`` is no package) and ``guard`` (the kit's guard,
:mod:`member_kit.guard.app`, in front of a stock a2a-sdk agent run as its own process
once for the session: ``tests/interop/quickstart_agent.py``) and ``sdk`` (a stock
a2a-sdk agent governed by the kit in-process: ``examples/sdk_member.py``). Each says
what a valid send to it carries (its skill, the scope that skill requires, an input it
accepts) and builds its app from settings, so that one attack table runs against all.
"""

from __future__ import annotations

import atexit
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.remote_risk.conftest import risk_input

TERMS_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "terms_member.py"
TERMS_MODULE = "examples_terms_member"
SDK_EXAMPLE = TERMS_EXAMPLE.with_name("sdk_member.py")
SDK_MODULE = "examples_sdk_member"


@dataclass(frozen=True)
class MemberUnderTest:
    """One member: its skill, the scope it requires, a narrower scope of the same member
    (not enough for the skill), an input it completes on, where in that input free text
    is, and its app from settings."""

    name: str
    skill: str
    scope: str
    narrow_scope: str
    valid_input: Callable[[], dict[str, Any]]
    text_path: tuple[str, ...]
    create_app: Callable[..., Any]


@cache
def example(name: str, path: Path) -> ModuleType:
    """The example at ``path`` as the module ``name``, loaded once."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def terms_example() -> ModuleType:
    """examples/terms_member.py as a module, loaded once."""
    return example(TERMS_MODULE, TERMS_EXAMPLE)


def sdk_example() -> ModuleType:
    """examples/sdk_member.py (a stock a2a-sdk agent, the kit in-process), loaded once."""
    return example(SDK_MODULE, SDK_EXAMPLE)


def _risk_app(**settings: Any) -> Any:
    from remote_risk.service import create_app
    from remote_risk.settings import Settings

    return create_app(Settings(**settings))


def _terms_app(**settings: Any) -> Any:
    from member_kit.server.app import create_app
    from member_kit.settings import MemberSettings

    return create_app(MemberSettings(**settings), terms_example().MEMBER)


@cache
def quickstart_agent() -> str:
    """The base URL of the stock a2a-sdk agent the guard stands in front of, started once
    (and stopped when the test process ends)."""
    agent = subprocess.Popen(
        [sys.executable, "-m", "tests.interop.quickstart_agent"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=TERMS_EXAMPLE.parents[1],
    )
    atexit.register(_stop, agent)
    assert agent.stdout is not None
    first = agent.stdout.readline().strip()
    assert first.startswith("agent listening on "), first
    return first.rpartition(" ")[2]


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=10)


def _guard_app(**settings: Any) -> Any:
    from member_kit.guard.app import create_guard_app
    from member_kit.guard.settings import GuardSettings
    from member_kit.guard.upstream import fetch_card

    upstream = quickstart_agent()
    scopes = {"summarize": "text:summarize"}
    guard = GuardSettings(**settings, upstream_url=upstream, skill_scopes=scopes)
    return create_guard_app(guard, fetch_card(upstream, max_bytes=100_000, timeout=10))


def _sdk_app(**settings: Any) -> Any:
    from member_kit.guard.settings import GuardSettings

    return sdk_example().member_app(GuardSettings(**settings))


def _terms_input() -> dict[str, Any]:
    return {"text": "Refunds are handled by the support team.", "terms": ["refund", "warranty"]}


RISK = MemberUnderTest(
    name="remote_risk",
    skill="interpret-risk-policy",
    scope="risk:interpret",
    narrow_scope="risk:read",
    valid_input=risk_input,
    text_path=("brief", "summary"),
    create_app=_risk_app,
)
TERMS = MemberUnderTest(
    name="terms",
    skill="check-terms",
    scope="terms:check",
    narrow_scope="terms:read",
    valid_input=_terms_input,
    text_path=("text",),
    create_app=_terms_app,
)
GUARD = MemberUnderTest(
    name="guard",
    skill="summarize",
    scope="text:summarize",
    narrow_scope="text:read",
    valid_input=lambda: {"text": "the quick brown fox"},
    text_path=("text",),
    create_app=_guard_app,
)
SDK = MemberUnderTest(
    name="sdk",
    skill="shout",
    scope="text:shout",
    narrow_scope="text:read",
    valid_input=lambda: {"text": "the quick brown fox"},
    text_path=("text",),
    create_app=_sdk_app,
)
MEMBERS = {member.name: member for member in (RISK, TERMS, GUARD, SDK)}
