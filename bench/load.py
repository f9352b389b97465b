"""`load`: many clients searching over Streamable HTTP while a burst of edits is indexed.

`groove serve --transport http` (a subprocess, loopback only) runs on an index
of generated notes. For `--seconds`, `--clients` clients (the Python SDK's
`mcp.Client`, one session each) call the `search` tool back to back with
queries drawn from the notes' words, while the bench writes `--edits` edits
(new notes and rewrites of existing ones, spread over the first half of the
window), each holding a word that appears nowhere else. Then, until
`--settle` seconds have passed, every edit is looked up by its own word
(retriever fts). Bounded in count and in time; it stops by itself.

Reported: requests, failed requests (an exception or a tool error), p50 /
p95 / p99 latency of a search as the client sees it, queries per second,
edits lost (not findable by their word at the end), and how long after the
last edit every edit was findable.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from mcp_types import CallToolResult

ROOT = Path(__file__).resolve().parent.parent
GROOVE = [sys.executable, "-m", "groove.cli"]
HEALTHY_S = 300.0  # how long `groove serve` may take to answer /healthz
DEFAULT_CLIENTS = 16
DEFAULT_EDITS = 200
DEFAULT_SECONDS = 60.0
DEFAULT_NOTES = 200
DEFAULT_SETTLE = 120.0
CONFIG = '[embedding]\nmodel = "{model}"\n\n[watch]\ndebounce_ms = 50\n'
WORDS = [
    "harbour",
    "glacier",
    "orchard",
    "lantern",
    "database",
    "latency",
    "checkpoint",
    "retrieval",
    "tokenizer",
    "notebook",
    "cluster",
    "meadow",
    "compiler",
    "granite",
    "monsoon",
    "violin",
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--clients", type=int, default=DEFAULT_CLIENTS, help=f"concurrent MCP clients (default {DEFAULT_CLIENTS})"
    )
    p.add_argument(
        "--edits", type=int, default=DEFAULT_EDITS, help=f"edits written during the run (default {DEFAULT_EDITS})"
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=DEFAULT_SECONDS,
        help=f"how long the clients search (default {DEFAULT_SECONDS:g})",
    )
    p.add_argument(
        "--notes",
        type=int,
        default=DEFAULT_NOTES,
        help=f"notes indexed before the server starts (default {DEFAULT_NOTES})",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=DEFAULT_SETTLE,
        help=f"how long to wait for every edit to be findable (default {DEFAULT_SETTLE:g} s)",
    )
    p.add_argument(
        "--model", default="all-MiniLM-L6-v2", help="[embedding] model of the server (default all-MiniLM-L6-v2)"
    )
    p.add_argument("--seed", type=int, default=1)


def _note(i: int) -> str:
    words = " ".join(f"{WORDS[(i + j) % len(WORDS)]}" for j in range(40))
    return f"# Note {i}\n\nNote {i} talks about {WORDS[i % len(WORDS)]} and {WORDS[(i * 5) % len(WORDS)]}. {words}.\n"


def unique_word(e: int) -> str:
    return f"loadmark{e:04d}q"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROOVE_")}
    env.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
    )
    return env


async def _politely(client: Any, arguments: dict[str, Any]) -> CallToolResult:
    """A search as a polite client sends it: when the server says it calls too fast (its per-client rate limit,
    which one client checking every edit back to back reaches), wait what it asks and send it again."""
    from mcp.shared.exceptions import MCPError

    from groove.serve.mcp.guard import RATE_LIMITED

    while True:
        try:
            return await client.call_tool("search", arguments)
        except MCPError as exc:
            if exc.error.code != RATE_LIMITED:
                raise
            await anyio.sleep(float((exc.error.data or {}).get("retry_after_s", 0.1)))


def _first_text(result: CallToolResult) -> str:
    """The text of a tool result's first content block ('' when it has none, the repr of a block of another kind)."""
    from mcp_types import TextContent

    if not result.content:
        return ""
    first = result.content[0]
    return first.text if isinstance(first, TextContent) else repr(first)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_healthy(proc: subprocess.Popen, base: str) -> None:
    """Until /healthz answers 200, for at most HEALTHY_S seconds."""
    import httpx

    with anyio.move_on_after(HEALTHY_S):
        async with httpx.AsyncClient(timeout=2) as http:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"groove serve exited with {proc.returncode}")
                try:
                    if (await http.get(f"{base}/healthz")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await anyio.sleep(0.1)
    raise RuntimeError("groove serve did not become healthy")


def _prepare(work: Path, kb: Path, common: list[str], notes: int, model: str) -> None:
    """The run's config, its notes and their index (`groove index`), before anything is timed."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "groove.toml").write_text(CONFIG.format(model=model), encoding="utf-8")
    kb.mkdir(exist_ok=True)
    for i in range(notes):
        (kb / f"n{i:04d}.md").write_text(_note(i), encoding="utf-8")
    done = subprocess.run(
        [*GROOVE, "index", *common],
        cwd=ROOT,
        env=_env(work),
        capture_output=True,
        text=True,
        timeout=1800,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise RuntimeError(f"groove index failed: {done.stderr[-2000:]}")


def _serve(work: Path, common: list[str], port: int) -> tuple[IO[bytes], subprocess.Popen]:
    """`groove serve --transport http` on the port, its output in work/serve.log (the file, for the caller to close)."""
    log = open(work / "serve.log", "wb")
    proc = subprocess.Popen(
        [*GROOVE, "serve", *common, "--transport", "http", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=_env(work),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return log, proc


async def run_load(
    work: Path,
    *,
    clients: int,
    edits: int,
    seconds: float,
    notes: int,
    settle: float,
    model: str = "all-MiniLM-L6-v2",
    seed: int = 1,
) -> dict[str, Any]:
    """The whole run; returns the figures (shared by the bench and its smoke test)."""
    from mcp import Client

    from bench.common import percentile

    kb = work / "notes"
    index = work / "index.sqlite"
    common = ["--config", str(work / "groove.toml"), "--kb", str(kb), "--index", str(index)]
    await anyio.to_thread.run_sync(_prepare, work, kb, common, notes, model)

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log, proc = await anyio.to_thread.run_sync(_serve, work, common, port)
    latencies: list[float] = []
    failures: list[str] = []
    written: dict[int, str] = {}
    rng = random.Random(seed)
    try:
        await _wait_healthy(proc, base)
        deadline = time.monotonic() + seconds

        async def client_loop(c: int) -> None:
            local = random.Random(seed * 1000 + c)
            async with Client(f"{base}/mcp") as client:
                while time.monotonic() < deadline:
                    query = " ".join(local.sample(WORDS, 2))
                    t0 = time.perf_counter()
                    try:
                        with anyio.fail_after(60):
                            result = await client.call_tool("search", {"query": query, "limit": 5})
                        if result.is_error:
                            failures.append(f"tool error: {_first_text(result)}"[:300])
                        else:
                            latencies.append((time.perf_counter() - t0) * 1000)
                    except Exception as exc:  # noqa: BLE001 - every failure is counted
                        failures.append(repr(exc)[:300])

        async def editor() -> None:
            spread = seconds / 2
            for e in range(edits):
                if e % 2 == 0 or notes == 0:
                    rel = f"load/e{e:04d}.md"
                else:  # rewrite an existing note, keeping its old words and adding the new one
                    rel = f"n{rng.randrange(notes):04d}.md"
                path = kb / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                old = path.read_text(encoding="utf-8") if path.exists() else f"# Edit {e}\n\n"
                path.write_text(old + f"\nEdit {e} adds the word {unique_word(e)}.\n", encoding="utf-8")
                written[e] = rel
                await anyio.sleep(spread / max(edits, 1))

        t_start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for c in range(clients):
                tg.start_soon(client_loop, c)
            tg.start_soon(editor)
        window = time.perf_counter() - t_start
        last_edit_done = time.perf_counter()

        # Every edit, findable by its own word?
        missing = dict(written)
        settle_deadline = time.monotonic() + settle
        async with Client(f"{base}/mcp") as client:
            while missing and time.monotonic() < settle_deadline:
                for e, rel in list(missing.items()):
                    result = await _politely(client, {"query": unique_word(e), "retriever": "fts", "limit": 5})
                    if not result.is_error and any(r["path"] == rel for r in result.structured_content["results"]):
                        del missing[e]
                if missing:
                    await anyio.sleep(0.5)
        all_found_s = time.perf_counter() - last_edit_done
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    requests = len(latencies) + len(failures)
    # What the server said of the failures (a client sees only "Server returned an error response"): its warnings.
    said = [
        line
        for line in (work / "serve.log").read_text(encoding="utf-8", errors="replace").splitlines()
        if "warning" in line or "error" in line
    ]
    return {
        "clients": clients,
        "requests": requests,
        "failed": len(failures),
        "failures": failures[:5],
        "qps": round(len(latencies) / window, 2) if window else float("nan"),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "edits": len(written),
        "lost_edits": len(missing),
        "lost": sorted(missing.values())[:10],
        "all_edits_findable_after_s": round(all_found_s, 1) if not missing else None,
        "window_s": round(window, 1),
        "server_warnings": said[:8] if failures else [],
    }


def main_async(args: argparse.Namespace):
    from bench.common import Report, Timer

    report = Report(
        "load",
        f"{args.clients} clients searching over Streamable HTTP while {args.edits} edits are indexed",
        params={
            "clients": args.clients,
            "edits": args.edits,
            "seconds": args.seconds,
            "notes": args.notes,
            "model": args.model,
        },
    )  # made first: its machine figures are the start's
    with Timer() as t, tempfile.TemporaryDirectory(prefix="groove-load-") as tmp:
        out = anyio.run(
            lambda: run_load(
                Path(tmp),
                clients=args.clients,
                edits=args.edits,
                seconds=args.seconds,
                notes=args.notes,
                settle=args.settle,
                model=args.model,
                seed=args.seed,
            )
        )
    report.ratios["failed_over_requests"] = (
        round(out["failed"] / out["requests"], 4) if out["requests"] else float("nan")
    )
    report.ratios["lost_over_edits"] = round(out["lost_edits"] / out["edits"], 4) if out["edits"] else float("nan")
    report.ratios["p95_over_p50"] = round(out["p95_ms"] / out["p50_ms"], 2) if out["p50_ms"] else float("nan")
    report.raw = {k: v for k, v in out.items() if k not in ("failures", "lost", "server_warnings")}
    for line in out["server_warnings"]:
        report.notes.append(f"server: {line[:300]}")
    for f in out["failures"]:
        report.notes.append(f"failure: {f}")
    if out["lost"]:
        report.notes.append(f"lost edits (first 10): {out['lost']}")
    report.seconds = t.seconds
    return report
