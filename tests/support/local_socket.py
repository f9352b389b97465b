"""Idle connections to the daemon's local socket under an open-file limit: issue 36, point 9, shared by
tests/test_local_endpoint_limits.py and `python -m bench hostile --attack 9`."""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path


def limited(command: list[str], limit: int) -> list[str]:
    """`command` under an open-file limit of `limit` (soft and hard: groove cannot raise it)."""
    if shutil.which("prlimit"):
        return ["prlimit", f"--nofile={limit}:{limit}", "--", *command]
    setter = (
        "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]),) * 2); "
        "os.execv(sys.argv[2], sys.argv[2:])"
    )
    return [sys.executable, "-c", setter, str(limit), *command]


def flood(path: Path, n: int) -> list[socket.socket]:
    """`n` connections to the socket that never send a byte (the kernel's backlog takes what is not accepted)."""
    held = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5.0)
        s.connect(str(path))
        held.append(s)
    return held


def closed(s: socket.socket) -> bool:
    """Whether the daemon closed this connection (end of stream, or reset); False while it is held open."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.settimeout(5.0)
