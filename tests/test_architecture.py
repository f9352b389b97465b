"""The shape of the code: imports go one way (docs/ARCHITECTURE.md), every groove error has one base."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from groove.errors import GrooveError

PACKAGE = ROOT / "groove"

# Rooms, top first. A module may import from its own room or any room below it; `beside` from anywhere.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("shells", ("groove.cli", "groove.clients", "groove.progress", "groove.autostart", "groove.serve", "groove.ops")),
    ("wiring", ("groove.daemon", "groove.api", "groove.index")),
    ("middle", ("groove.sync", "groove.search", "groove.evaluate")),
    ("bottom", ("groove.embed", "groove.store", "groove.corpus")),
]
BESIDE = ("groove", "groove.config", "groove.folders", "groove.logs", "groove.errors", "groove.trust", "groove.backoff")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(module: str) -> int | None:
    """Index of the module's room (0 = top), None when it sits beside every room."""
    if module in BESIDE:
        return None
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} is in no room: add it to LAYERS here and to docs/ARCHITECTURE.md")


def is_module(name: str) -> bool:
    """Whether a dotted groove name is a module or a package (not a name inside one)."""
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def groove_imports(path: Path) -> list[tuple[int, str]]:
    """Every groove module the file imports (lazy imports inside functions too), with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "groove"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == "groove":
            # `from groove import daemon` and `from groove.store import schema` name modules
            found += sorted({(node.lineno, f"{node.module}.{a.name}") if is_module(f"{node.module}.{a.name}")
                             else (node.lineno, node.module) for a in node.names})
    return found


def import_graph() -> dict[str, set[str]]:
    """Each groove module -> the groove modules it imports."""
    return {module_name(path): {target for _, target in groove_imports(path) if target != module_name(path)}
            for path in sorted(PACKAGE.rglob("*.py"))}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> b -> ... -> a) for each back edge a depth-first walk meets; [] when there is none."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path = [start]
        state[start] = 1
        stack = [iter(sorted(graph.get(start, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return cycles


def test_no_module_imports_from_a_room_above_it():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = module_name(path)
        mine = room(me)
        for line, target in groove_imports(path):
            theirs = room(target)
            if mine is None and theirs is not None:
                upward.append(f"{me}:{line} imports {target} ({LAYERS[theirs][0]}), but {me} sits beside every room")
            elif mine is not None and theirs is not None and theirs < mine:
                upward.append(f"{me}:{line} ({LAYERS[mine][0]}) imports {target} ({LAYERS[theirs][0]}), a room above")
    assert not upward, "imports must go downward only:\n" + "\n".join(upward)


def test_the_check_sees_an_upward_import_when_there_is_one(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from groove.serve.process.main import run\nimport groove.index\nfrom groove import daemon\n")
    assert [t for _, t in groove_imports(bad)] == ["groove.serve.process.main", "groove.index", "groove.daemon"]
    assert room("groove.store.reads") > room("groove.search.pipeline") > room("groove.index") > room("groove.serve.process.main")


def test_no_groove_modules_import_each_other_in_a_cycle():
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles between groove modules (lazy imports count):\n" + "\n".join(
        " -> ".join(cycle) for cycle in cycles)


def test_the_check_names_an_import_cycle_when_there_is_one(tmp_path):
    graph = {"groove.a": {"groove.b"}, "groove.b": {"groove.c", "groove.errors"}, "groove.c": {"groove.a"},
             "groove.errors": set(), "groove.d": {"groove.d2"}, "groove.d2": {"groove.errors"}}
    assert import_cycles(graph) == [["groove.a", "groove.b", "groove.c", "groove.a"]]
    assert import_cycles({"groove.a": {"groove.b"}, "groove.b": set()}) == []
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from groove.store import connection, shadow\n    from groove.embed.embedder import Embedder\n")
    assert [t for _, t in groove_imports(lazy)] == ["groove.store.connection", "groove.store.shadow", "groove.embed.embedder"]


def test_the_ops_commands_are_imported_by_the_cli_alone():
    importers = sorted(
        module_name(path) for path in PACKAGE.rglob("*.py")
        if not module_name(path).startswith("groove.ops")
        and any(t == "groove.ops" or t.startswith("groove.ops.") for _, t in groove_imports(path))
    )
    assert importers == ["groove.cli"], importers


def test_every_exception_groove_defines_derives_from_groove_error():
    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = importlib.import_module(module_name(path))
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == module.__name__
                    and not name.startswith("_") and not issubclass(obj, GrooveError)):
                strays.append(f"{module.__name__}.{name}")
    assert not strays, f"these exceptions do not derive from GrooveError: {strays}"


def test_help_does_not_import_the_model_libraries_or_the_mcp_sdk():
    code = (
        "import sys, contextlib, io\n"
        "from groove.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'mcp', 'uvicorn') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
