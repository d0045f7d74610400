"""The services a bench run starts: remote_risk as ``serve()`` runs it, and the baselines.

remote_risk is started through its own command line (``python -m remote_risk``), so it
runs exactly as deployed: delegation tokens checked on every call against the pinned
keys of the bench's coordinator issuer, and tasks and used tokens in the durable store
that ``serve()`` picks by default (SQLite ``remote-risk.db`` in its data directory).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agent_cards.identity import identity_of
from agent_cards.keys import KeySet, SigningKey, load_key_set, save_key_set
from bench import procs
from coordinator.authority.delegator import DEFAULT_ISSUER
from member_kit.storage.engine import DATABASE_FILE
from member_kit.trust.issuers import signing_keys
from remote_risk.settings import JSONRPC_PATH

STORE_NAME = f"SQLite {DATABASE_FILE} in the data directory (serve() default)"


@dataclass(frozen=True)
class Issuer:
    """The bench's coordinator identity: its key set on disk and its published JWK Set."""

    keys: KeySet
    keys_dir: Path
    jwks_file: Path

    @classmethod
    def create(cls, root: Path) -> Issuer:
        keys = KeySet(active=SigningKey.generate())
        keys_dir = root / "issuer-keys"
        save_key_set(keys, keys_dir)
        jwks_file = root / "issuer-jwks.json"
        jwks_file.write_text(_json(keys.public_jwks()))
        return cls(keys, keys_dir, jwks_file)

    @staticmethod
    def keys_of(root: Path) -> KeySet:
        """The key set :meth:`create` wrote under ``root``."""
        return load_key_set(root / "issuer-keys")


def _json(value: object) -> str:
    import json

    return json.dumps(value)


@dataclass(frozen=True)
class Running:
    url: str
    audience: str
    process: subprocess.Popen[bytes]
    data_dir: Path | None = None


@contextmanager
def remote_risk(
    root: Path,
    issuer: Issuer,
    *,
    name: str = "risk",
    delay: float = 0.0,
    capacity: int = 1000,
    env: dict[str, str] | None = None,
    extra: Sequence[str] = (),
    runner: Sequence[str] = ("remote_risk",),
) -> Iterator[Running]:
    """remote_risk trusting ``issuer``, with its own data directory under ``root``; run
    by ``runner`` (a module and the arguments it takes before remote_risk's own)."""
    port = procs.free_port()
    data_dir = root / f"{name}-data"
    command = procs.python(
        *runner,
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--trust-issuer",
        f"{DEFAULT_ISSUER}={issuer.jwks_file}",
        "--skill-delay-seconds",
        str(delay),
        "--task-capacity",
        str(capacity),
        *extra,
    )
    url = f"http://{procs.HOST}:{port}"
    # Its keys, created here as the service itself would: a token's audience is the
    # identity of its card key (agent_cards.identity), never its URL.
    audience = identity_of(signing_keys(None, data_dir).signing_key().verification_key())
    with procs.server(command, port, env=env, log=root / f"{name}.log") as process:
        yield Running(url, audience, process, data_dir)


@contextmanager
def floor(
    root: Path, issuer: Issuer, module: str = "bench.floor", *extra: str
) -> Iterator[Running]:
    """The floor (:mod:`bench.floor`): remote_risk's checks of a send, each once; or,
    by ``module``, a floor of :mod:`bench.floor_tables`."""
    port = procs.free_port()
    data_dir = root / f"floor-{port}-data"
    trust = f"{DEFAULT_ISSUER}={issuer.jwks_file}"
    args = ("--port", str(port), "--data-dir", str(data_dir), "--trust-issuer", trust)
    command = procs.python(module, *args, *extra)
    audience = identity_of(signing_keys(None, data_dir).signing_key().verification_key())
    with procs.server(command, port, log=root / "floor.log") as process:
        yield Running(f"http://{procs.HOST}:{port}", audience, process, data_dir)


@contextmanager
def baseline(root: Path, kind: str, issuer: Issuer | None = None) -> Iterator[Running]:
    """One of :mod:`bench.baselines` (``sdk``, ``fastapi``, ``fastapi-jwt``)."""
    port = procs.free_port()
    url = f"http://{procs.HOST}:{port}"
    args = [kind, "--port", str(port)]
    if kind == "fastapi-jwt":
        assert issuer is not None
        args += ["--jwks", str(issuer.jwks_file), "--audience", url + JSONRPC_PATH]
    if kind == "sdk-db":
        args += ["--database", str(root / f"sdk-tasks-{port}.db")]
    command = procs.python("bench.baselines", *args)
    with procs.server(command, port, log=root / f"{kind}.log") as process:
        yield Running(url, url + JSONRPC_PATH, process)
