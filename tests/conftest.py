"""Suite-wide markers: ``serial`` (run alone, after the parallel pass) and ``slow`` (the
slowest tier, which ``make test-fast`` skips).

``make test`` runs every test not marked ``serial`` on two workers per core (pytest-xdist
``--dist loadfile``: a module's tests stay on one worker, so a module-scoped fixture, often
a real service, starts once rather than once per worker; the console's modules, which share
one costly session deployment, stay on one worker together), then the ``serial`` ones in one
process; a pass that finds no ``serial`` test succeeds. ``slow`` is not written on tests:
a test is in the slow tier when its node id is listed in ``tests/slow_tier.txt``, measured
from a full run (see :mod:`tests.slow_tier`). CI runs everything, so a stale list only
moves a test between the inner loop and CI, never out of CI.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from collections.abc import Generator, Iterator

import pytest

from bench.procs import held_count, release_ports
from tests.slow_tier import heaviest_first, listed

# A bound on a hang, not a speed check: the slowest test takes about a minute on a loaded
# 2-core machine. Without it a hung test held the whole run until CI's own limit.
HANG_SECONDS = int(os.environ.get("FEDERATION_TEST_HANG_SECONDS", "600"))


class Hung(BaseException):
    """Raised in a test (setup, call or teardown) still running after HANG_SECONDS."""


def _hung(signum: int, frame: object) -> None:
    faulthandler.dump_traceback(file=sys.stderr)  # every thread: where each one waits
    raise Hung(f"still running after {HANG_SECONDS} s: every thread's stack is above")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(HANG_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def _ports_released() -> Iterator[None]:
    """The ports a test (or a fixture set up for it) reserved are released after it."""
    before = held_count()
    yield
    release_ports(before)


# Folders whose modules share session fixtures too costly to build once per worker (the
# console's deployment: a demo run, two peers, delegations and a served coordinator; and
# its browser): their modules go to one worker together, as if they were one module.
ONE_WORKER = ("tests/console/",)


def scope_of(nodeid: str) -> str:
    """What ``--dist loadfile`` keeps on one worker: a module, or a whole ONE_WORKER folder."""
    module = nodeid.partition("::")[0]
    return next((folder for folder in ONE_WORKER if module.startswith(folder)), module)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FolderScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return FolderScheduling(config, log)


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.nodeid in listed():
        item.add_marker(pytest.mark.slow)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules in order of their measured seconds, heaviest first (a module's own tests
    keep their order): ``--dist loadfile`` then never leaves a heavy module for last."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.partition("::")[0], []).append(item)
    items[:] = [item for path in heaviest_first(list(modules)) for item in modules[path]]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The serial pass with nothing marked ``serial`` is a pass, not "no tests ran"."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.config.option.markexpr == (
        "serial"
    ):
        session.exitstatus = pytest.ExitCode.OK
