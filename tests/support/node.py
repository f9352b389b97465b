"""The npm-installed MCP clients (the Inspector CLI, the conformance suite) and the Node 22 they run on.

Tests reach them through conftest's `npm_tools` fixture (which marks them `npm`)."""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.common import ROOT


def _node_package() -> str:
    """The npm package carrying a Node 22 binary for this machine (the Inspector and the suite need 22)."""
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"node-{system}-{arch}"


NODE_PACKAGE = _node_package()
# The project's own installer pins the versions (the conformance suite, the Inspector CLI, Node 22).
INSTALL_NODE_TOOLS = ROOT / "scripts" / "install-node-tools"


@functools.lru_cache(maxsize=1)
def _install_npm_tools() -> tuple[Path | None, str]:
    """scripts/install-node-tools (pinned; one prefix per machine, so one install serves every run)."""
    if shutil.which("npm") is None:
        return None, "npm is not installed on this machine"
    proc = subprocess.run([str(INSTALL_NODE_TOOLS)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/install-node-tools failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1]), ""


class NodeTools:
    def __init__(self, prefix: Path):
        self.prefix = prefix
        self.bin = prefix / "node_modules" / ".bin"
        self.node_bin = prefix / "node_modules" / NODE_PACKAGE / "bin"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        env["PATH"] = f"{self.node_bin}{os.pathsep}{env.get('PATH', '')}"
        return env


def node_tools() -> NodeTools:
    """The Inspector CLI and the conformance suite, installed once per machine by scripts/install-node-tools;
    skipped where npm is absent (outside CI)."""
    prefix, reason = _install_npm_tools()
    if prefix is None:
        if os.environ.get("CI"):  # a CI machine must run the protocol checks, not skip them
            raise RuntimeError(f"{reason}: CI needs npm to run the conformance suite and the Inspector CLI")
        pytest.skip(reason)
    return NodeTools(prefix)
