"""Shared fixtures: real SQLite files in tmp dirs, the real packaged model (loaded once)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "notes"
DATA = ROOT.parent / "shared" / "data"
GROOVE = [sys.executable, "-m", "groove.cli"]
# The quality filter (decision 0020) hides the one-line notes most tests write: off for the suite, module
# fixtures included (they run before _isolated_config), and in the servers tests start (mcp_support.server_env).
# Its own tests (test_quality_filter.py) turn it on with settings or env of their own.
QUALITY_FILTER_OFF = ("GROOVE_QUALITY_FILTER__ENABLED", "false")
os.environ[QUALITY_FILTER_OFF[0]] = QUALITY_FILTER_OFF[1]


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
    monkeypatch.setenv(*QUALITY_FILTER_OFF)  # see QUALITY_FILTER_OFF
    monkeypatch.chdir(home)


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


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def section_text(i: int, words: int = 25) -> str:
    """A distinct, realistic-enough paragraph for section i."""
    topics = ["database", "latency", "embedding", "checkpoint", "retrieval", "tokenizer", "notebook", "cluster"]
    body = " ".join(f"{topics[(i + j) % len(topics)]}{i}x{j}" for j in range(words))
    return f"## Section {i}\n\nThis section talks about item {i}. {body}.\n\n"


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60.0) -> None:
    """Poll `check` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"timed out waiting for: {what}")
