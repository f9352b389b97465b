"""The real `groove serve` harness, shared by the tests and bench/: subprocesses, their environment, readiness.

Tests reach it through conftest's `spawn` fixture (which marks them `process`); bench/hostile.py imports it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from tests.support.common import GROOVE, QUALITY_FILTER_OFF

START_TIMEOUT = 90.0   # a cold process imports torch and loads the model
EMBED_TIMEOUT = 600.0  # every chunk embedded by the real model: a bound a loaded 2-core machine meets
EVENT_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(home: Path) -> dict[str, str]:
    """The environment of a groove subprocess: offline model, isolated config and data dirs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROOVE_")}
    env.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
    )
    # Off, as in-process tests have it (tests/conftest.py: _isolated_config); a test of the filter passes env to turn it on.
    env[QUALITY_FILTER_OFF[0]] = QUALITY_FILTER_OFF[1]
    return env


def serve_argv(kb: Path | None, index: Path | None, *extra: str, command: list[str] | None = None) -> list[str]:
    """`groove serve` on a folder (none: a search node of a shared store, which `extra` names with --store);
    `command` replaces `groove` (e.g. FAKE_GROOVE: the bag-of-words embedder)."""
    where = [*(["--kb", str(kb)] if kb is not None else []), *(["--index", str(index)] if index is not None else [])]
    return [*(command or GROOVE), "serve", *where, *extra]


# `groove` with the bag-of-words fake embedder (tests/support/fake_groove.py): for tests about the protocol, not the model.
FAKE_GROOVE = [sys.executable, str(Path(__file__).resolve().parent / "fake_groove.py")]


class ServerProcess:
    """A real `groove serve --transport http` subprocess; its output goes to a log file."""

    headers: dict[str, str] = {}  # the bearer token header, when the server has one

    def __init__(self, kb: Path | None, index: Path | None, workdir: Path, port: int | None = None, extra: tuple[str, ...] = (),
                 *, bind_host: str = "127.0.0.1", env: dict[str, str] | None = None, token: str | None = None,
                 command: list[str] | None = None):
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self.log_path = workdir / f"serve-{self.port}.log"
        self.workdir = workdir
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        argv = serve_argv(kb, index, "--transport", "http", "--bind", f"{bind_host}:{self.port}", *extra, command=command)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            argv, cwd=workdir, env={**server_env(workdir), **(env or {})}, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def client(self, **kwargs: Any) -> Any:
        """An MCP client of this server (sending the bearer token when there is one)."""
        import httpx2  # the HTTP client the SDK's transport takes
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        if not self.headers:
            return Client(self.url, **kwargs)
        http = httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0))
        return Client(streamable_http_client(self.url, http_client=http), **kwargs)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"groove serve exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                r = httpx.get(f"{self.base}/healthz", headers=self.headers, timeout=2.0)
                if r.status_code == 200:
                    return r.json()
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"groove serve did not answer /healthz within {timeout} s:\n{self.log()[-3000:]}")

    def wait_indexed(self, documents: int, timeout: float | None = None, embedded: bool = True) -> dict[str, Any]:
        """Until the startup reconcile is done, `documents` notes are indexed and (with `embedded`) every
        chunk has its vector, asked over MCP. Tests that compare rankings need both retrievers complete:
        a search while vectors are pending is a different (FTS-heavy) fused list."""
        async def status() -> dict[str, Any]:
            async with self.client() as client:
                result = await client.call_tool("index_status", {})
                return result.structured_content

        deadline = time.monotonic() + (timeout if timeout is not None else (EMBED_TIMEOUT if embedded else START_TIMEOUT))
        st: dict[str, Any] = {}
        while time.monotonic() < deadline:
            st = anyio.run(status)
            if st["startup_reconcile_done"] and st["documents"] == documents and not (embedded and st["pending_chunks"]):
                return st
            time.sleep(0.2)
        raise AssertionError(f"index not ready: {st}\n{self.log()[-3000:]}")

    def terminate(self, timeout: float = 10.0) -> tuple[int | None, float]:
        """SIGTERM; returns (exit code or None if it had to be killed, seconds it took)."""
        if self.proc.poll() is not None:
            return self.proc.returncode, 0.0
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc: int | None = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        self._log.close()
        return rc, time.monotonic() - t0
