"""The shape of the code: imports go one way (docs/ARCHITECTURE.md), every groove error has one base."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

from groove.errors import GrooveError
from tests.support.common import ROOT

PACKAGE = ROOT / "groove"

# Rooms, top first. A module may import from its own room or any room below it; `beside` from anywhere.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("shells", ("groove.cli", "groove.clients", "groove.progress", "groove.autostart", "groove.serve", "groove.ops")),
    ("wiring", ("groove.daemon", "groove.api", "groove.index")),
    ("middle", ("groove.sync", "groove.search", "groove.evaluate")),
    ("bottom", ("groove.embed", "groove.store", "groove.corpus")),
]
BESIDE = ("groove", "groove.config", "groove.folders", "groove.logs", "groove.errors", "groove.trust", "groove.backoff",
          "groove.dirs", "groove.oslock", "groove.grooveseek")


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
    assert room("groove.store.sqlite.reads") > room("groove.search.pipeline") > room("groove.index") > room("groove.serve.process.main")


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
    lazy.write_text("def f():\n    from groove.store.sqlite import connection, shadow\n    from groove.embed.embedder import Embedder\n")
    assert [t for _, t in groove_imports(lazy)] == ["groove.store.sqlite.connection", "groove.store.sqlite.shadow", "groove.embed.embedder"]


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


def test_help_does_not_import_the_model_libraries_or_the_mcp_sdk(spawn):
    code = (
        "import sys, contextlib, io\n"
        "from groove.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'mcp', 'uvicorn') if m in sys.modules))\n"
    )
    out = spawn.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- bench/: a tool over groove's public names (issue 34) -------------------------------------------------

BENCH = ROOT / "bench"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def bench_private_names(paths: list[Path]) -> set[str]:
    """The private names bench/ defines itself: its functions, classes and module or class names, and the
    attributes it sets on `self` / `cls`; reaching one of those (`bench.scale._search`) is bench's own business."""
    own = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                own.add(node.attr)
    return {name for name in own if is_private(name)}


def groove_private_uses(path: Path, own: set[str]) -> list[tuple[int, str]]:
    """Where a bench module reaches a private name of groove: imports one (`from groove.x import _y`,
    `import groove._x`), reads, sets or patches an attribute `_y` that is not bench's own (or any `_y` of a
    name bound to a groove import: `offtopic._clip`), names one to getattr/setattr, or subclasses a groove
    class and defines a `_method` there (overriding the pipeline's private steps)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    groove_names: set[str] = set()
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "groove":
                    if any(is_private(part) for part in alias.name.split(".")):
                        found.append((node.lineno, f"import {alias.name}"))
                    groove_names.add(alias.asname or "groove")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "groove":
            assert node.module is not None
            if any(is_private(part) for part in node.module.split(".")):
                found.append((node.lineno, f"from {node.module} import ..."))
            for alias in node.names:
                if is_private(alias.name):
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
                groove_names.add(alias.asname or alias.name)

    def from_groove(expr: ast.expr) -> bool:
        while isinstance(expr, (ast.Attribute, ast.Call, ast.Subscript)):
            expr = expr.func if isinstance(expr, ast.Call) else expr.value
        return isinstance(expr, ast.Name) and expr.id in groove_names

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            if from_groove(node.value) or node.attr not in own:
                found.append((node.lineno, f".{node.attr}"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and is_private(node.args[1].value)):
            found.append((node.lineno, f"{node.func.id}(..., {node.args[1].value!r})"))
        elif isinstance(node, ast.ClassDef) and any(from_groove(base) for base in node.bases):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names = [item.name]
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    names = [t.id for t in targets if isinstance(t, ast.Name)]
                else:
                    names = []
                found += [(item.lineno, f"class {node.name}({ast.unparse(node.bases[0])}) defines {name}")
                          for name in names if is_private(name)]
    return sorted(found)


def test_no_bench_uses_a_private_name_of_groove():
    paths = sorted(BENCH.rglob("*.py"))
    own = bench_private_names(paths)
    found = [f"{path.relative_to(ROOT)}:{line}: {what}"
             for path in paths for line, what in groove_private_uses(path, own)]
    assert not found, ("a bench measures groove through its public names (a private one pins every refactor of "
                       "groove to the bench):\n" + "\n".join(found))


def test_the_bench_check_sees_each_way_of_reaching_a_private_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from groove.search.offtopic import _MARKUP\n"
        "import groove._hidden\n"
        "from groove.search import offtopic\n"
        "from groove.search.pipeline import Searcher\n"
        "x = offtopic._clip(1.0, (0, 1))\n"
        "def f(daemon):\n    return daemon._inflight\n"
        "class Capturing(Searcher):\n    async def _fuse_and_refine(self):\n        pass\n"
        "Searcher._fuse_and_refine = None\n"
        "getattr(offtopic, '_clip')\n")
    assert [what for _, what in groove_private_uses(bad, set())] == [
        "from groove.search.offtopic import _MARKUP", "import groove._hidden", "._clip",
        "._inflight", "class Capturing(Searcher) defines _fuse_and_refine", "._fuse_and_refine",
        "getattr(..., '_clip')"]
    fine = tmp_path / "fine.py"
    fine.write_text(
        "from groove.search import offtopic\n"
        "from bench.scale import _search\n"
        "class Server:\n    def __init__(self):\n        self._log = None\n"
        "    def _stop(self):\n        self._log = 1\n"
        "def g(server):\n    server._stop()\n    return offtopic.score({}).__class__\n")
    assert groove_private_uses(fine, bench_private_names([fine])) == []


def bench_module(path: Path, bench: Path) -> str:
    parts = list(path.relative_to(bench.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def bench_imports(path: Path, bench: Path, modules: set[str]) -> set[str]:
    """The bench modules a file imports (lazy imports inside functions too; `from bench import x` names one)."""
    me = bench_module(path, bench)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing module's package
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {m for m in found if m in modules}


def registry(bench: Path) -> set[str]:
    """The registered benches: the modules of bench/__main__.py's BENCHES table and of bench/ab's VARIANTS."""
    out = set()
    for path, table in ((bench / "__main__.py", "BENCHES"), (bench / "ab" / "__init__.py", "VARIANTS")):
        if not path.is_file():
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == table for t in node.targets):
                out |= set(ast.literal_eval(node.value).values())
    return out


def stray_bench_modules(bench: Path) -> list[str]:
    """Modules under `bench` that neither the registry names nor a registered bench imports (through helpers)."""
    paths = {bench_module(p, bench): p for p in sorted(bench.rglob("*.py"))}
    modules = set(paths)
    seen = {"bench", "bench.__main__"} | (registry(bench) & modules)
    todo = list(seen)
    while todo:
        for target in bench_imports(paths[todo.pop()], bench, modules) - seen:
            seen.add(target)
            todo.append(target)
    return sorted(modules - seen)


def test_every_bench_module_is_registered_or_a_helper_a_registered_bench_imports():
    strays = stray_bench_modules(BENCH)
    assert not strays, ("modules under bench/ that `python -m bench` cannot run and no registered bench imports: "
                        f"{strays}; register them (bench/__main__.py BENCHES, bench/ab VARIANTS) or delete them")


def test_the_registry_check_names_a_module_outside_the_registry(tmp_path):
    bench = tmp_path / "bench"
    (bench / "ab").mkdir(parents=True)
    (bench / "__init__.py").write_text("")
    (bench / "__main__.py").write_text('BENCHES = {"index": "bench.index", "ab": "bench.ab"}\n')
    (bench / "common.py").write_text("")
    (bench / "index.py").write_text("from bench.common import x\ndef run():\n    from bench import helper\n")
    (bench / "helper.py").write_text("")
    (bench / "research.py").write_text("from bench.common import x\n")
    (bench / "ab" / "__init__.py").write_text('VARIANTS = {"fts": "bench.ab.fts"}\n')
    (bench / "ab" / "fts.py").write_text("")
    (bench / "ab" / "old.py").write_text("")
    assert stray_bench_modules(bench) == ["bench.ab.old", "bench.research"]


# --- the store seam (issue 35): only groove/store/ speaks to a database ----------------------------------------

DRIVERS = ("aiosqlite", "sqlite3", "sqlean", "sqlite_vec", "psycopg", "psycopg_pool", "asyncpg", "pgvector")


def driver_imports(path: Path) -> list[tuple[int, str]]:
    """Every database driver the file imports (lazy imports inside functions too), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] in DRIVERS]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in DRIVERS:
                found.append((node.lineno, node.module))
    return found


def test_no_module_outside_the_store_imports_a_database_driver():
    outside = [
        f"{module_name(path)}:{line} imports {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not module_name(path).startswith("groove.store")
        for line, name in driver_imports(path)
    ]
    assert not outside, "only groove/store/ may speak to a database:\n" + "\n".join(outside)


def test_the_driver_check_sees_a_driver_imported_anywhere_in_a_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import aiosqlite\nfrom psycopg import sql\ndef f():\n    import sqlite3.dbapi2\n    import json\n")
    assert [name for _, name in driver_imports(bad)] == ["aiosqlite", "psycopg", "sqlite3.dbapi2"]


def test_no_module_outside_the_store_writes_sql():
    """A statement in a string outside groove/store/ (SELECT ... FROM, INSERT INTO, UPDATE ... SET, DELETE FROM)."""
    import re

    statement = re.compile(r"\b(SELECT\b.+\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.S)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if module_name(path).startswith("groove.store"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and statement.search(node.value):
                found.append(f"{module_name(path)}:{node.lineno}: {node.value[:60]!r}")
    assert not found, "SQL outside groove/store/:\n" + "\n".join(found)
