"""Child processes for the tests: the one way a test starts one.

A test gets a `Spawn` from conftest's `spawn` fixture, which marks it `process` (outside `make test-fast`);
a test that starts a process any other way fails (conftest refuses it, and tests/test_tiers.py reads the
test files for it). `Spawn` is a thin layer over `subprocess`, so a test reads as it did: `spawn.run(argv, ...)`
is `subprocess.run(argv, ...)`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.support.common import GROOVE
from tests.support.server import ServerProcess, server_env


class Spawn:
    def run(self, argv: Any, **kwargs: Any) -> subprocess.CompletedProcess:
        """`subprocess.run`."""
        return subprocess.run(argv, **kwargs)

    def popen(self, argv: Any, **kwargs: Any) -> subprocess.Popen:
        """`subprocess.Popen`."""
        return subprocess.Popen(argv, **kwargs)

    def groove(self, *args: str, home: Path, command: list[str] | None = None, env: dict[str, str] | None = None,
               **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """`groove ARGS` (or `command ARGS`) with its config and data dirs under `home` (server_env), its output
        captured as text."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run([*(command or GROOVE), *args], env={**server_env(home), **(env or {})}, **kwargs)

    def server(self, kb: Path | None, index: Path | None, workdir: Path, *args: Any, **kwargs: Any) -> ServerProcess:
        """A `groove serve --transport http` (tests/support/server.py)."""
        return ServerProcess(kb, index, workdir, *args, **kwargs)

    def stdio(self, **kwargs: Any) -> Any:
        """`mcp.StdioServerParameters`: the server an MCP stdio client launches (`Client(spawn.stdio(...))`)."""
        from mcp import StdioServerParameters

        return StdioServerParameters(**kwargs)
