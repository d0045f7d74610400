"""Where the coordinator keeps what must outlive one command: registered cards and runs.

Chosen by ``--data-dir``, else ``FEDERATION_DATA_DIR``, else the XDG user data directory.
Files are written atomically (a temporary file renamed over the old one), so a crash
never leaves half a document behind. The directory is created owner-only (0700) and the
database file 0600, as the signing keys are: a ledger and the payloads kept for recovery
are nobody else's to read. A directory or database that already exists keeps its mode.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from contracts import strict_json
from coordinator.errors import DataDirError

ENV_VAR = "FEDERATION_DATA_DIR"
APP_NAME = "a2a-federation"
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


def resolve(option: str | None = None) -> Path:
    if option:
        return Path(option).expanduser()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / APP_NAME


class DataDir:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def ensure(self) -> Path:
        """The directory, created owner-only if it does not exist yet."""
        try:
            self.root.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        except OSError as exc:
            raise DataDirError(f"cannot create the data directory: {exc}") from None
        return self.root

    def create_private(self, *parts: str) -> Path:
        """``parts`` in the directory, created empty and owner-only (0600) if absent."""
        path = self.path(*parts)
        self.ensure()
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        except FileExistsError:
            pass
        except OSError as exc:
            raise DataDirError(f"cannot create {path.name} in the data directory: {exc}") from None
        return path

    def read_json(self, *parts: str, default: Any = None) -> Any:
        path = self.path(*parts)
        if not path.exists():
            return default
        try:
            return strict_json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise DataDirError(f"cannot read {path.name} in the data directory: {exc}") from None

    def write_json(self, value: Any, *parts: str) -> None:
        """``value`` written whole (a reader sees the old file or the new one), owner-only
        (0600) as every file the coordinator keeps here."""
        path = self.path(*parts)
        self.ensure()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # a temporary file of this writer's own (mkstemp: 0600, a name no other process
            # writing the same file at once can take), then renamed over the file
            descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            with os.fdopen(descriptor, "wb") as file:
                file.write(strict_json.dumps(value))
            os.replace(temporary, path)
        except OSError as exc:
            raise DataDirError(f"cannot write {path.name} in the data directory: {exc}") from None
