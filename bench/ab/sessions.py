"""memory of `groove serve` after N `initialize` calls: groove's session cap against the SDK's

`python -m bench ab sessions [--count N]` (was `python -m bench.sessions`). A hostile or broken
client can open handshake-era sessions without ever closing them. This starts `groove serve
--transport http` on a small notes folder twice, once with groove's session cap (`[serve.http]
max_sessions`, default 256) and once with the SDK's own default cap (10,000, which is what
groove used before), and for each:

1. reads the server's resident memory (VmRSS) once it is healthy and has
   answered one search;
2. sends N `initialize` requests (default 2,000), each opening a session that
   is never used again;
3. reads VmRSS again, counts how many initializes were refused (503), and
   checks that one more client can still shake hands and search.

The figure that matters is the growth per run and the ratio between them;
docs/mcp.md quotes it. Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _notes(kb: Path) -> None:
    kb.mkdir(parents=True, exist_ok=True)
    for i in range(20):
        (kb / f"note-{i:02d}.md").write_text(
            f"# Note {i}\n\nParagraph {i} about quokka number {i}.\n", encoding="utf-8"
        )


def run_once(root: Path, max_sessions: int | None, count: int) -> dict:
    import httpx  # lazy: `python -m bench --help` imports every variant

    kb = root / "notes"
    _notes(kb)
    port = _free_port()
    config = root / f"groove-{max_sessions}.toml"
    config.write_text(
        "" if max_sessions is None else f"[serve.http]\nmax_sessions = {max_sessions}\n", encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROOVE_")}
    env.update(HF_HUB_OFFLINE="1", XDG_DATA_HOME=str(root / "data"), XDG_CONFIG_HOME=str(root / "config"))
    argv = [
        str(Path(sys.executable).with_name("groove")),
        "serve",
        "--config",
        str(config),
        "--kb",
        str(kb),
        "--index",
        str(root / f"index-{max_sessions}.sqlite"),
        "--transport",
        "http",
        "--bind",
        f"127.0.0.1:{port}",
    ]
    log = open(root / f"serve-{max_sessions}.log", "wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"server did not start: {(root / f'serve-{max_sessions}.log').read_text()[-2000:]}")
            time.sleep(0.2)
        anyio.run(_search, base + "/mcp")
        before = rss_mb(proc.pid)
        statuses: dict[int, int] = {}
        t0 = time.monotonic()
        with httpx.Client(timeout=30) as client:
            for _ in range(count):
                r = client.post(base + "/mcp", json=INIT, headers=HEADERS)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        seconds = time.monotonic() - t0
        time.sleep(1.0)
        after = rss_mb(proc.pid)
        anyio.run(_search, base + "/mcp")  # a new client still gets in
        return {
            "max_sessions": max_sessions or "SDK default (10000)",
            "initializes": count,
            "statuses": statuses,
            "rss_before_mb": round(before, 1),
            "rss_after_mb": round(after, 1),
            "growth_mb": round(after - before, 1),
            "seconds": round(seconds, 1),
            "new_client_after": "ok",
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


async def _search(url: str) -> None:
    from mcp import Client

    async with Client(url, mode="legacy") as client:
        result = await client.call_tool("search", {"query": "quokka", "limit": 1, "retriever": "fts"})
        assert not result.is_error, result


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--count", type=int, default=2000, help="initialize calls per run (default 2000)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="groove-bench-sessions-") as tmp:
        rows = [run_once(Path(tmp) / "capped", 256, args.count), run_once(Path(tmp) / "sdk", 10_000, args.count)]
    out = {
        "runs": rows,
        # RSS moves by a few MB on its own (allocator, lazy imports): compare the two growths side by side.
        "kb_per_initialize": {str(r["max_sessions"]): round(r["growth_mb"] * 1024 / args.count, 1) for r in rows},
    }
    print(json.dumps(out, indent=2))
    return out
