"""The suite's own guards: a hung test ends with every thread's stack instead of holding
the run until CI's limit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_hung_test_fails_with_every_threads_stack(tmp_path: Path) -> None:
    hanging = ROOT / "tests" / f"test_zz_hangs_{os.getpid()}.py"
    hanging.write_text(
        "import threading\n\n\ndef test_waits_forever():\n    threading.Event().wait()\n"
    )
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(hanging)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "FEDERATION_TEST_HANG_SECONDS": "2"},
            timeout=120,
        )
    finally:
        hanging.unlink()
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert "still running after 2 s" in completed.stdout
    assert "in test_waits_forever" in completed.stdout  # the waiting thread's stack


def test_the_consoles_modules_share_one_worker() -> None:
    """Each console module would build the session's deployment again on another worker
    (about 20 s each); the scheduler keeps the folder together, other modules apart."""
    from tests.conftest import scope_of

    console = {
        scope_of("tests/console/test_console_http.py::test_x"),
        scope_of("tests/console/test_console_browser.py::test_y[a]"),
    }
    assert console == {"tests/console/"}
    assert scope_of("tests/coordinator/test_api.py::test_z") == "tests/coordinator/test_api.py"


SERIAL_MARK = re.compile(r"^(?:pytestmark = pytest\.mark\.serial|\s*@pytest\.mark\.serial)", re.M)


def test_every_serial_module_is_named_for_the_serial_pass() -> None:
    """The serial pass collects only the modules the Makefile names (SERIAL_TESTS): a
    module marking a test ``serial`` and not named there would run in neither pass."""
    root = Path(__file__).resolve().parents[1]
    makefile = (root / "Makefile").read_text()
    [line] = [ln for ln in makefile.splitlines() if ln.startswith("SERIAL_TESTS =")]
    named = set(line.partition("=")[2].split())
    marking = {
        str(path.relative_to(root))
        for path in (root / "tests").rglob("test_*.py")
        if SERIAL_MARK.search(path.read_text(encoding="utf-8"))
    }
    assert named == marking
