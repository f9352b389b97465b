"""What most tests share: the checkout's folders, the `groove` command, and small helpers to write notes and wait."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Awaitable, Callable

import anyio

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples" / "notes"
DATA = ROOT.parent / "shared" / "data"
GROOVE = [sys.executable, "-m", "groove.cli"]
# The quality filter (decision 0020) hides the one-line notes most tests write: off for the suite, module
# fixtures included (they run before conftest's _isolated_config), and in the servers tests start
# (tests/support/server.py: server_env). Its own tests (test_quality_filter.py) turn it on with settings or env
# of their own.
QUALITY_FILTER_OFF = ("GROOVE_QUALITY_FILTER__ENABLED", "false")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def section_text(i: int, words: int = 25) -> str:
    """A distinct, realistic-enough paragraph for section i."""
    topics = ["database", "latency", "embedding", "checkpoint", "retrieval", "tokenizer", "notebook", "cluster"]
    body = " ".join(f"{topics[(i + j) % len(topics)]}{i}x{j}" for j in range(words))
    return f"## Section {i}\n\nThis section talks about item {i}. {body}.\n\n"


def note(title: str, body: str, *, tags: list[str] | None = None, date: str | None = None) -> str:
    """A note's text: optional front matter (tags, date), a title, a body."""
    fm = []
    if tags:
        fm.append(f"tags: [{', '.join(tags)}]")
    if date:
        fm.append(f"date: {date}")
    head = "---\n" + "\n".join(fm) + "\n---\n" if fm else ""
    return f"{head}# {title}\n\n{body}\n"


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60.0) -> None:
    """Poll `check` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"timed out waiting for: {what}")
