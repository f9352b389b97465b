"""Fixtures and hooks; the helpers tests share live in tests/support/.

Every test runs with its own config and data dirs (no test reads the developer's groove.toml, GROOVE_*
variables or ~/.local/share/groove) and with the bag-of-words fake (tests/support/fakes.py) as the embedder
of any Index or Daemon it opens without naming one.

Five fixtures stand for what makes a test slow; each marks the tests that use it, directly or through
another fixture (pytest_collection_modifyitems reads `item.fixturenames`; tests/support/tiers.py: MARKED_BY):

    real_model  -> model    the real embedding models: with it, an Index or Daemon opened without an
                            embedder loads the configured model, as groove does
    spawn       -> process  a child process: groove, python, `groove serve`, the wheel build, a stdio server
    browser     -> browser  a real headless Chromium (tests/support/browser.py)
    npm_tools   -> npm      the npm-installed MCP clients and Node (tests/support/node.py)
    postgres    -> postgres a new database on a real PostgreSQL server with pgvector (tests/support/postgres.py);
                            a store contract test's postgresql side (`backend`) is marked the same

`make test-fast` runs the tests with none of these marks. A test that starts a process without `spawn`,
`browser` or `npm_tools` fails here, at run time, and tests/test_tiers.py reads the test files for spawning
or model-loading calls outside them, so the fast tier cannot quietly slow down.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator

import anyio
import pytest
import structlog

import groove.index
from groove.config import EmbeddingSettings
from groove.embed.embedder import Embedder, backend_for
from tests.support.common import QUALITY_FILTER_OFF
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.off_topic import write_topics
from tests.support.oneshot import index_once
from tests.support.tiers import MARKED_BY, MAY_SPAWN, PARAM_MARKS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ[QUALITY_FILTER_OFF[0]] = QUALITY_FILTER_OFF[1]  # module fixtures run before _isolated_config sets it



# --- the tiers ----------------------------------------------------------------------------------------------

def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, marker in MARKED_BY.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
        params = getattr(getattr(item, "callspec", None), "params", {})
        for (name, value), marker in PARAM_MARKS.items():
            if params.get(name) == value:
                item.add_marker(marker)


class _Running:
    """The test being set up, run or torn down (module fixtures are set up and torn down within one)."""

    item: pytest.Item | None = None
    server_starting = False  # the session's PostgreSQL server starting or stopping (its initdb, pg_ctl)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _Running.item = item


def _marks(item: pytest.Item) -> set[str]:
    return {m.name for m in item.iter_markers()}


_real_make_embedder = groove.index.make_embedder
_real_popen_init = subprocess.Popen.__init__


def _suite_embedder(settings: EmbeddingSettings) -> Embedder:
    """groove.index.make_embedder for the suite: the fake, unless the test takes `real_model` (or names a
    remote backend, which loads no model: its tests point it at a local stand-in server)."""
    item = _Running.item
    if (item is not None and "model" in _marks(item)) or backend_for(settings) == "openai":
        return _real_make_embedder(settings)
    return BagOfWordsEmbedder()


def _guarded_popen_init(self: subprocess.Popen, args: Any, *rest: Any, **kwargs: Any) -> None:
    item = _Running.item
    if item is not None and not (_marks(item) & MAY_SPAWN) and not _Running.server_starting:
        raise RuntimeError(
            f"{item.nodeid} starts a process ({args!r}) without the `spawn` fixture: take `spawn` "
            "(tests/support/process.py), which marks the test `process`, outside `make test-fast`")
    _real_popen_init(self, args, *rest, **kwargs)


@pytest.fixture(scope="session", autouse=True)
def _tiers_kept() -> Iterator[None]:
    """The fake embedder by default, and no process from a test that did not ask for one."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(groove.index, "make_embedder", _suite_embedder)
        mp.setattr(subprocess.Popen, "__init__", _guarded_popen_init)
        yield


@pytest.fixture(scope="session")
def real_model() -> Any:
    """The real embedding models (marks the test `model`): an Index or Daemon opened without an embedder
    loads the configured model. Returns groove's own make_embedder, to build one by its settings."""
    return _real_make_embedder


@pytest.fixture(scope="session")
def spawn() -> Any:
    """Child processes (marks the test `process`): tests/support/process.py."""
    from tests.support.process import Spawn

    return Spawn()


@pytest.fixture(scope="session")
def browser() -> Any:
    """A real headless Chromium (marks the test `browser`), installed by scripts/install-browser when missing;
    skips, saying why, when none can be had."""
    from tests.support.browser import Browser, browser_binaries, install_browser

    chromium, driver = browser_binaries()
    if chromium is None or driver is None:
        said = install_browser()
        chromium, driver = browser_binaries()
        if chromium is None or driver is None:
            pytest.skip("no headless browser: chromium and chromium-driver are not installed and "
                        f"scripts/install-browser could not install them ({said or 'no output'})")
    pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")
    return Browser(chromium, driver)


@pytest.fixture(scope="session")
def npm_tools() -> Any:
    """The Inspector CLI, the conformance suite and Node 22 (marks the test `npm`): tests/support/node.py."""
    from tests.support.node import node_tools

    return node_tools()


# --- every test -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL server with pgvector for the session (tests/support/postgres.py)."""
    from tests.support.postgres import PostgresServer

    _Running.server_starting = True  # set up for a postgres test, torn down after whichever test ran last
    try:
        server = PostgresServer()
    finally:
        _Running.server_starting = False
    try:
        yield server
    finally:
        _Running.server_starting = True
        try:
            server.stop()
        finally:
            _Running.server_starting = False


@pytest.fixture
def postgres(postgres_server: Any) -> str:
    """The URL of a new, empty database on a real PostgreSQL server with pgvector (marks the test `postgres`)."""
    return postgres_server.database()


@pytest.fixture(scope="session")
def _engine_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache of built embedding engines for the whole run (groove/embed/e5onnx.py builds the
    int8 engine there once; every test's own data dir links to it)."""
    return tmp_path_factory.mktemp("engines")


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, _engine_cache: Path) -> None:
    """No test reads the developer's own groove.toml, GROOVE_* variables or data dir."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    (home / "data" / "groove").mkdir(parents=True)
    (home / "data" / "groove" / "engines").symlink_to(_engine_cache, target_is_directory=True)
    for name in list(os.environ):
        if name.startswith("GROOVE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv(*QUALITY_FILTER_OFF)  # see tests/support/common.py: QUALITY_FILTER_OFF
    monkeypatch.chdir(home)


# --- shared by several test files ------------------------------------------------------------------------------

@pytest.fixture
def kb(tmp_path: Path) -> Path:
    d = tmp_path / "notes"
    d.mkdir()
    return d


@pytest.fixture
def make_settings(tmp_path: Path):
    from groove.config import load_settings

    def make(kb: Path, **overrides: Any):
        overrides.setdefault("index_path", tmp_path / "index.sqlite")
        return load_settings(None, kb_path=kb, **overrides)

    return make


@pytest.fixture
def topics_vault(kb: Path, make_settings):
    """Ten unrelated topics indexed with the fake embedder (tests/support/off_topic.py); their settings."""
    write_topics(kb)
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    return settings


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """For tests that configure logging as a CLI run does (the benches, the engine's log lines): later tests
    get theirs back."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**saved)
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)
