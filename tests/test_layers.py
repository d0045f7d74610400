"""The architecture, checked: layer order, no import cycles, the services kept apart.

Imports are read from the source (``ast``), including those inside functions, so a
deferred import cannot hide an edge. Each package imports only from the layers listed
before its own; ``contracts`` is pure data; ``member_kit`` (the remote half of the
federation, for any team) imports nothing of the coordinator nor of any member;
``remote_risk`` (the risk team's member, built on the kit) imports nothing of the
coordinator, and the coordinator imports the risk team's code in exactly two places,
each inside the function that needs it (never at import): the evaluation's single
controller runs the risk rules in-process, and the CLI starts the service. A package's
``__init__`` imports nothing, so importing one loads no server.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("contracts", "agent_cards", "member_kit", "coordinator", "remote_risk")

# Lowest first: a module may import its own layer and the layers before it.
LAYERS = {
    "coordinator": [
        "errors",
        "loop",
        "ids",
        "telemetry",
        "storage",
        "audit",
        "workspace",
        "authority",
        "handoff",
        "remote",
        "dispatch",
        "recovery",
        "assessment",
        "service",
        "console",
        "cli",
        "__main__",
        "",
    ],
    "member_kit": [
        "errors",
        "skill",
        "telemetry",
        "storage",
        "tasks",
        "audit",
        "trust",
        "settings",
        "configuration",
        "server",
        "command",
        "guard",
        "sdk",
        "",
    ],
    "remote_risk": ["risk", "settings", "service", "__main__", ""],
    # the shared lower layer: its errors, the clock, JWS and keys, the documents' wire
    # forms, transparency, then the mechanics each service binds its own names to
    "agent_cards": [
        "errors",
        "runtime",
        "clock",
        "tls",
        "jws",
        "jwk",
        "trusted",
        "keys",
        "signatures",
        "identity",
        "dpop",
        "bindings",
        "presence",
        "signing",
        "transparency",
        "bounded_replies",
        "storage",
        "models",
        "telemetry",
        "edge",
        "documents",
        "serving",
        "",
    ],
}
# Which top-level packages each may import at all.
ALLOWED = {
    "contracts": {"contracts"},
    "agent_cards": {"contracts", "agent_cards"},
    # the bounded HTTP edge both services run behind; it knows neither
    "coordinator": {"contracts", "agent_cards", "coordinator"},
    # the kit knows neither the coordinator nor any member
    "member_kit": {"contracts", "agent_cards", "member_kit"},
    "remote_risk": {"contracts", "agent_cards", "member_kit", "remote_risk"},
}
# The named crossings from the coordinator into the risk team's code and the kit
# (deferred): the risk rules in the evaluation, and the CLI starting a service.
CROSSINGS = {
    "coordinator.assessment.evaluate": ("remote_risk.risk.", "member_kit.errors"),
    "coordinator.cli.commands": ("remote_risk.__main__", "member_kit.guard.main"),
}
# Nothing left to cut: remote_risk has its own model adapter (remote_risk.risk.model).
NOT_YET_CUT: dict[str, tuple[str, ...]] = {}
# contracts holds data and pure rules: none of these may appear there.
IO_LIBRARIES = {"httpx", "sqlalchemy", "fastapi", "starlette", "uvicorn", "openai", "socket"}


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    files = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = path
    return files


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module ``name`` imports, anywhere in its source, resolved to a module name."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                dotted = f"{base}.{alias.name}"
                found.add(dotted if dotted in known else base)
    return found


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    known = set(files)
    return {name: imports_of(name, path, known) & known - {name} for name, path in files.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm: the groups of modules that import each other in a ring."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def layer(name: str) -> tuple[str, int] | None:
    top, _, rest = name.partition(".")
    order = LAYERS.get(top)
    if order is None:
        return None
    first = rest.partition(".")[0]
    assert first in order, f"{name}: its layer {first!r} is not in the layer list"
    return top, order.index(first)


FILES = module_files(ROOT, PACKAGES)
GRAPH = import_graph(FILES)
ALL_IMPORTS = {name: imports_of(name, path, set(FILES)) for name, path in FILES.items()}


def test_no_import_cycles() -> None:
    """No ring of modules imports each other, deferred imports included."""
    rings = [sorted(group) for group in strongly_connected(GRAPH) if len(group) > 1]
    assert rings == []


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_module_imports_only_from_its_layer_and_below(name: str) -> None:
    mine = layer(name)
    top = name.partition(".")[0]
    for target in sorted(GRAPH[name]):
        target_top = target.partition(".")[0]
        if target_top != top:
            crossing = CROSSINGS.get(name, ()) + NOT_YET_CUT.get(name, ())
            allowed = target_top in ALLOWED[top] or target.startswith(crossing)
            assert allowed, f"{name} imports {target}: outside what {top} may use"
            continue
        theirs = layer(target)
        if mine is not None and theirs is not None:
            assert theirs[1] <= mine[1], f"{name} imports {target}, a layer above it"


def test_contracts_do_no_io() -> None:
    for name in (n for n in FILES if n.startswith("contracts")):
        used = {module.partition(".")[0] for module in ALL_IMPORTS[name]}
        assert not used & IO_LIBRARIES, f"{name} imports {used & IO_LIBRARIES}"


def test_the_crossings_are_the_only_ones() -> None:
    """Exactly the named modules reach from the coordinator into remote_risk or the kit."""
    crossing = {
        name
        for name in FILES
        if name.startswith("coordinator")
        and any(t.startswith(("remote_risk", "member_kit")) for t in ALL_IMPORTS[name])
    }
    assert crossing <= set(CROSSINGS)


def test_the_kit_knows_neither_the_coordinator_nor_any_member() -> None:
    """Another team's agent runs on the kit alone: nothing in it reaches further."""
    reached = {
        (name, target)
        for name in FILES
        if name.startswith("member_kit")
        for target in ALL_IMPORTS[name]
        if target.startswith(("coordinator", "remote_risk"))
    }
    assert reached == set()


# The one product package that may import the a2a-sdk (an optional extra): the kit's
# in-process integration for a2a-sdk agents.
SDK_INTEGRATION = "member_kit.sdk"


def test_only_the_kits_sdk_integration_imports_the_a2a_sdk() -> None:
    """The coordinator, agent_cards, contracts, remote_risk and the rest of the kit never
    import ``a2a`` (deferred imports included), so none needs the SDK installed."""
    importing = {
        name
        for name in FILES
        if any(target.partition(".")[0] == "a2a" for target in ALL_IMPORTS[name])
    }
    outside = {n for n in importing if not (n + ".").startswith(SDK_INTEGRATION + ".")}
    assert outside == set()
    assert importing, "the check reads no a2a import at all: it would not catch one"


# The kit's shape: no module over 450 lines and no folder of more than 15 modules.
MAX_MODULE_LINES, MAX_FOLDER_MODULES = 450, 15
# What remote_risk keeps of its own (its skill, prose, figures, model, settings).
MAX_REMOTE_RISK_LINES = 2500


def test_the_kits_modules_and_folders_stay_small() -> None:
    kit = [path for name, path in FILES.items() if name.startswith("member_kit")]
    long = {
        str(p.relative_to(ROOT)) for p in kit if len(p.read_text().splitlines()) > MAX_MODULE_LINES
    }
    assert long == set(), long
    folders: dict[str, int] = {}
    for path in kit:
        folder = str(path.parent.relative_to(ROOT))
        folders[folder] = folders.get(folder, 0) + 1
    full = {folder for folder, count in folders.items() if count > MAX_FOLDER_MODULES}
    assert full == set(), full


def test_the_coordinators_modules_and_folders_keep_the_kits_bounds() -> None:
    """The coordinator's modules and folders keep the kit's bounds too: one concept per
    module, and a folder that outgrows its bound splits into sub-packages named by
    domain (remote/wire, remote/cards, dispatch/attempt, audit/log...)."""
    coordinator = [path for name, path in FILES.items() if name.startswith("coordinator")]
    long = {
        str(p.relative_to(ROOT))
        for p in coordinator
        if len(p.read_text().splitlines()) > MAX_MODULE_LINES
    }
    assert long == set(), long
    folders: dict[Path, int] = {}
    for path in coordinator:
        folders[path.parent] = folders.get(path.parent, 0) + 1
    assert {f: n for f, n in folders.items() if n > MAX_FOLDER_MODULES} == {}


def test_the_shared_layer_stays_small() -> None:
    """agent_cards (what both services share) keeps the same shape as the kit, generated
    protobuf modules aside."""
    shared = [
        path
        for name, path in FILES.items()
        if name.startswith("agent_cards") and "_pb2" not in path.name
    ]
    long = [p for p in shared if len(p.read_text().splitlines()) > MAX_MODULE_LINES]
    assert long == []
    folders: dict[Path, int] = {}
    for path in shared:
        folders[path.parent] = folders.get(path.parent, 0) + 1
    assert {f: n for f, n in folders.items() if n > MAX_FOLDER_MODULES} == {}


def test_remote_risk_keeps_only_what_is_about_risk() -> None:
    own = [path for name, path in FILES.items() if name.startswith("remote_risk")]
    lines = sum(len(path.read_text().splitlines()) for path in own)
    assert lines <= MAX_REMOTE_RISK_LINES, lines


def module_level_imports(path: Path) -> list[str]:
    """What a module imports when it is imported: its top-level statements (inside a
    top-level ``if`` or ``try`` too), not a function's body nor ``if TYPE_CHECKING:``."""
    found: list[str] = []
    pending: list[ast.stmt] = list(ast.parse(path.read_text()).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            pending.extend(node.orelse)
        elif isinstance(node, ast.If | ast.Try):
            pending.extend([*node.body, *node.orelse])
            pending.extend(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            found.append("." * node.level + (node.module or ""))
    return found


def test_the_coordinator_loads_nothing_of_remote_risk_at_import() -> None:
    """The crossings are deferred: no coordinator module imports remote_risk when it is
    imported, so the coordinator starts without the risk team's code."""
    early = {
        name: [t for t in module_level_imports(FILES[name]) if t.startswith("remote_risk")]
        for name in FILES
        if name.startswith("coordinator")
    }
    assert {name: found for name, found in early.items() if found} == {}


# The one init that names its package's API: importing member_kit.sdk is asking for the
# a2a-sdk integration (``from member_kit.sdk import govern``), so it loads it.
INITS_WITH_AN_API = {"member_kit.sdk"}


@pytest.mark.parametrize("package", ["agent_cards", "coordinator", "member_kit", "remote_risk"])
def test_package_inits_import_nothing(package: str) -> None:
    """Importing a package loads none of its modules (a caller imports the module it
    uses by name), so importing ``remote_risk`` or ``coordinator.service`` starts no
    server's worth of modules."""
    inits = [
        n
        for n, p in FILES.items()
        if n.startswith(package) and p.name == "__init__.py" and n not in INITS_WITH_AN_API
    ]
    importing = {name: module_level_imports(FILES[name]) for name in inits}
    assert {name: found for name, found in importing.items() if found} == {}


def packages() -> list[str]:
    return sorted(n for n, p in FILES.items() if p.name == "__init__.py")


@pytest.mark.parametrize("name", packages())
def test_each_package_exports_what_its_init_names(name: str) -> None:
    """``__all__`` is declared, every name in it exists, and every public name the
    ``__init__`` binds (other than its sub-modules) is in it."""
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} declares no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names what it does not have: {missing}"
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    tree = ast.parse(FILES[name].read_text())
    bound = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            bound.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
    public = {n for n in bound if not n.startswith("_")} - submodules
    assert public <= set(exported), f"{name} binds {public - set(exported)} without exporting"
