"""`http`: MCP search over Streamable HTTP, idle vs while the daemon embeds, and 1 vs 8 clients.

`groove serve --transport http` runs as a subprocess on an index of SciFact
notes (the first `--base-docs`, indexed before the server starts). The bench
talks to it with the Python SDK's `mcp.Client` (Streamable HTTP, one session
per client), calling the `search` tool with SciFact queries (plain searches,
as a client sends them; in the latency passes each is followed by the same
search with `explain: true`, untimed, to read the server's own timings):

1. idle latency (A): one client, the queries one after another (p50/p95);
2. throughput, idle: 1 client, then 8 concurrent clients (each its own
   session, queries back to back), in `--seconds` windows ordered 1, 8, 8, 1
   so that drifting load falls on both; queries/s per setting;
3. "during reindex" latency (B): `--add-docs` more notes are moved into the
   folder; once the daemon has picked them up (pending chunks > 0) the same
   queries run again while it writes and embeds them. Pending counts before
   and after show the work was going on throughout;
4. idle latency again (A) once the queue has drained: idle = both A passes,
   and their ratio shows the noise between two identical measurements.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from bench.common import (
    BenchError,
    Report,
    Timer,
    convert_scifact,
    data_dir,
    machine,
    make_settings,
    ratio,
    scifact_queries,
    settings_summary,
    summary,
)

DEFAULT_BASE = 500  # ~900 chunks; --base-docs 1000 --add-docs 0 for the bigger run
DEFAULT_ADD = 300  # ~540 chunks: enough embedding to outlast the 'during' phase
DEFAULT_QUERIES = 40
DEFAULT_SECONDS = 8.0
DEFAULT_CLIENTS = 8
START_TIMEOUT_S = 180.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--base-docs",
        type=int,
        default=DEFAULT_BASE,
        help=f"SciFact docs indexed before the server starts (default {DEFAULT_BASE})",
    )
    p.add_argument(
        "--add-docs",
        type=int,
        default=DEFAULT_ADD,
        help=f"docs added while serving, embedded during the last phase (default {DEFAULT_ADD}; 0 = all the rest)",
    )
    p.add_argument(
        "--queries", type=int, default=DEFAULT_QUERIES, help=f"queries per latency phase (default {DEFAULT_QUERIES})"
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=DEFAULT_SECONDS,
        help=f"length of each throughput window (default {DEFAULT_SECONDS})",
    )
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=300.0,
        help="how long to wait for the added notes to be embedded before the second idle pass (default 300 s)",
    )
    p.add_argument(
        "--server-threads",
        type=int,
        default=None,
        metavar="N",
        help="OMP_NUM_THREADS for the server (default: unset, torch's own choice)",
    )
    p.add_argument(
        "--clients",
        type=int,
        default=DEFAULT_CLIENTS,
        help=f"concurrent clients in the parallel setting (default {DEFAULT_CLIENTS})",
    )


def serve_available() -> bool:
    """Whether this groove has `serve --transport http`."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "groove.cli", "serve", "--help"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "--transport" in out.stdout and "http" in out.stdout


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`groove serve --transport http` as a subprocess this bench owns."""

    def __init__(
        self,
        config: Path,
        kb: Path | None,
        index: Path | None,
        log: Path,
        threads: int | None = None,
        python: str = sys.executable,
        cwd: Path | None = None,
        store: str | None = None,
    ):
        """`kb` and `index`: the notes folder and its SQLite index; `store`: a PostgreSQL URL instead (`--store`),
        with no `kb` a search node of that store."""
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.health = f"http://127.0.0.1:{self.port}/healthz"
        self.log = log
        cmd = [
            python,
            "-m",
            "groove.cli",
            "serve",
            "--transport",
            "http",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--config",
            str(config),
            *(["--kb", str(kb)] if kb is not None else []),
            *(["--index", str(index)] if index is not None else []),
            *(["--store", store] if store else []),
            "--log-level",
            "warning",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        # A bench's clients call back to back to measure the server: the per-client rate limit (20 calls a
        # second) would refuse them once a search takes under 50 ms, as it does with the int8 engine.
        env.setdefault("GROOVE_SERVE__HTTP__TOOL_CALLS_PER_S", "100000")
        env.setdefault("GROOVE_SERVE__HTTP__TOOL_CALL_BURST", "100000")
        if threads:
            env["OMP_NUM_THREADS"] = str(threads)  # torch's intra-op threads in the server
        self._log_file = open(log, "wb")
        self.proc = subprocess.Popen(
            cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, env=env
        )

    async def health_check(self) -> dict | None:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=5.0) as client:
                r = await client.get(self.health)
            return r.json() if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    async def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"groove serve exited with {self.proc.returncode}; its output: {self.tail()}")
            if await self.health_check() is not None:
                return
            await anyio.sleep(0.25)
        raise BenchError(f"groove serve was not ready after {START_TIMEOUT_S:.0f} s; its output: {self.tail()}")

    async def pending(self) -> int:
        h = await self.health_check()
        return int(h["pending"]) if h else -1

    def tail(self, n: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log_file.close()
        return self.proc.returncode


async def _call(client, query: str, server_side: list[dict] | None = None) -> float:
    """One plain `search` tool call; returns the client-side milliseconds. With `server_side`, then the
    same search with `explain` (untimed), whose server timings (total, query embedding) it appends."""
    t = time.perf_counter()
    result = await client.call_tool("search", {"query": query, "limit": 10})
    elapsed = (time.perf_counter() - t) * 1000
    if result.is_error:
        raise BenchError(f"search tool error for {query!r}: {result.content}")
    if server_side is not None:
        result = await client.call_tool("search", {"query": query, "limit": 10, "explain": True})
        sc = result.structured_content or {}
        timings = (sc.get("explain") or sc.get("result", {}).get("explain") or {}).get("timings_ms", {})
        server_side.append(
            {"total_ms": timings.get("total_ms", math.nan), "embed_ms": timings.get("embed_ms", math.nan)}
        )
    return elapsed


async def _latencies(url: str, queries: list[str], server_side: list[dict] | None = None) -> list[float]:
    from mcp import Client

    out = []
    async with Client(url) as client:
        for q in queries:
            out.append(await _call(client, q, server_side))
    return out


async def _throughput(url: str, queries: list[str], clients: int, seconds: float, pid: int | None = None) -> dict:
    """`clients` sessions, opened first; then each sends queries back to back for `seconds`.

    The clients run in this process and share the cores with the server, so the wall-clock queries/s carries
    their CPU too. With the server's `pid`, its own CPU (utime + stime, /proc/<pid>/stat) over the window is
    counted apart from this process's (the clients'): `server_cpu_ms_per_query`, `client_cpu_ms_per_query`
    and `server_cpu_bound_qps` (cores / the server's CPU per query: what its own CPU allows)."""
    from contextlib import AsyncExitStack

    from mcp import Client

    from bench.throughput import proc_cpu_s

    done = [0] * clients
    lat: list[float] = []
    async with AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(Client(url)) for _ in range(clients)]
        start = anyio.Event()
        t_end = 0.0

        async def worker(k: int) -> None:
            await start.wait()
            j = k * 7
            while time.perf_counter() < t_end:
                lat.append(await _call(sessions[k], queries[j % len(queries)]))
                done[k] += 1
                j += 1

        async with anyio.create_task_group() as tg:
            for k in range(clients):
                tg.start_soon(worker, k)
            await anyio.lowlevel.checkpoint()
            cpu0 = proc_cpu_s(pid) if pid is not None else 0.0
            own0 = time.process_time()
            t0 = time.perf_counter()
            t_end = t0 + seconds
            start.set()
        wall = time.perf_counter() - t0  # includes the calls still in flight at the end
        own = time.process_time() - own0
        server_cpu = proc_cpu_s(pid) - cpu0 if pid is not None else None
    total = sum(done)
    out = {
        "clients": clients,
        "queries": total,
        "wall_s": round(wall, 2),
        "qps": round(total / wall, 2),
        "p50_ms": summary(lat)["p50_ms"],
        "client_cpu_ms_per_query": round(own * 1000 / total, 2) if total else None,
    }
    if server_cpu is not None:
        out["server_cpu_ms_per_query"] = round(server_cpu * 1000 / total, 2) if total else None
        out["server_cpu_bound_qps"] = (
            round((os.cpu_count() or 1) / server_cpu * total, 2) if total and server_cpu > 0 else None
        )
    return out


def _cpu_per_query(windows: list[dict], key: str) -> float | None:
    """CPU ms per query over these windows together, weighed by their queries; None when not measured."""
    got = [(w[key], w["queries"]) for w in windows if w.get(key) is not None]
    q = sum(n for _, n in got)
    return round(sum(v * n for v, n in got) / q, 2) if q else None


def _server_summary(rows: list[dict]) -> dict:
    """p50 of the server's own timings (explain.timings_ms): the part of a call that is not HTTP/MCP."""
    total = [r["total_ms"] for r in rows if not math.isnan(r["total_ms"])]
    embed = [r["embed_ms"] for r in rows if not math.isnan(r["embed_ms"])]
    return {"total_p50_ms": summary(total)["p50_ms"], "embed_p50_ms": summary(embed)["p50_ms"]}


async def run(args: argparse.Namespace) -> Report:
    from tests.support.oneshot import index_once

    t_start = time.perf_counter()
    m0 = machine()
    data = data_dir(args.data)
    if not await anyio.to_thread.run_sync(serve_available):
        raise BenchError("`groove serve --transport http` does not exist in this groove")
    queries = scifact_queries(data, args.queries)
    with tempfile.TemporaryDirectory(prefix="groove-bench-http-") as tmp_s:
        tmp = Path(tmp_s)
        kb = tmp / "notes"
        staged = tmp / "staged"
        base = convert_scifact(data, kb, args.base_docs, scratch=tmp / "scratch")
        added = convert_scifact(data, staged, args.add_docs, skip=args.base_docs, scratch=tmp / "scratch")
        settings = make_settings(tmp, kb, tmp / "index.sqlite")
        with Timer() as t_index:
            built = await index_once(settings)

        srv_idle: list[dict] = []
        srv_during: list[dict] = []
        server = Server(
            tmp / "groove.toml", kb, settings.resolved_index_path(), tmp / "serve.log", threads=args.server_threads
        )
        try:
            with Timer() as t_ready:
                await server.wait_ready()
            await _latencies(server.url, (queries * 2)[:10])  # warm up: model load, first connections

            idle_a = await _latencies(server.url, queries, srv_idle)
            windows = []
            for c in (1, args.clients, args.clients, 1):
                windows.append(await _throughput(server.url, queries, c, args.seconds, pid=server.proc.pid))

            # Add the staged notes (a rename, so each file appears whole) and wait for the daemon to take them.
            (kb / "added").mkdir()
            for f in sorted(staged.glob("*.md")):
                os.rename(f, kb / "added" / f.name)
            t_add = time.perf_counter()
            pending_start = 0
            while time.perf_counter() - t_add < 10:
                pending_start = await server.pending()
                if pending_start > 0:
                    break
                await anyio.sleep(0.05)
            picked_up_s = time.perf_counter() - t_add
            during = await _latencies(server.url, queries, srv_during)
            pending_end = await server.pending()

            # Idle again once the queue has drained: idle before and after bracket the reindex (A B A).
            with Timer() as t_drain:
                with anyio.move_on_after(args.drain_timeout):
                    while await server.pending() != 0:  # noqa: ASYNC110 - another process's queue, read over HTTP: no event
                        await anyio.sleep(0.5)
            drained = await server.pending() == 0
            await anyio.sleep(1.0)  # the last vectors' write and the watcher settle
            idle_b = await _latencies(server.url, queries, srv_idle)
            idle = idle_a + idle_b
        finally:
            rc = server.stop()

    one = [w for w in windows if w["clients"] == 1]
    many = [w for w in windows if w["clients"] == args.clients]
    qps1 = sum(w["queries"] for w in one) / sum(w["wall_s"] for w in one)
    qpsn = sum(w["queries"] for w in many) / sum(w["wall_s"] for w in many)
    s_idle, s_during = summary(idle), summary(during)
    report = Report(
        bench="http",
        machine_start=m0,
        title=f"MCP search over Streamable HTTP: idle vs during reindex; 1 vs {args.clients} clients",
        params={
            "base_docs": base,
            "base_chunks": built.chunks_written,
            "added_docs": added,
            "queries": len(queries),
            "window_s": args.seconds,
            "clients": args.clients,
            "server_threads": args.server_threads or "default",
            **settings_summary(settings),
        },
    )
    report.ratios = {
        "during_reindex_p50_over_idle": ratio(s_during["p50_ms"], s_idle["p50_ms"]),
        "during_reindex_p95_over_idle": ratio(s_during["p95_ms"], s_idle["p95_ms"]),
        f"qps_{args.clients}_clients_over_1": ratio(qpsn, qps1),
        "server_side_during_p50_over_idle": ratio(
            _server_summary(srv_during)["total_p50_ms"], _server_summary(srv_idle)["total_p50_ms"]
        ),
        "idle_p50_after_over_before": ratio(summary(idle_b)["p50_ms"], summary(idle_a)["p50_ms"]),
        f"qps_{args.clients}_clients_window2_over_window1": ratio(many[1]["qps"], many[0]["qps"]),
        "qps_1_client_window2_over_window1": ratio(one[1]["qps"], one[0]["qps"]),
    }
    report.raw = {
        "idle": {k: s_idle[k] for k in ("p50_ms", "p95_ms", "mean_ms")},
        "idle_before": {k: summary(idle_a)[k] for k in ("p50_ms", "p95_ms")},
        "idle_after": {k: summary(idle_b)[k] for k in ("p50_ms", "p95_ms")},
        "during_reindex": {k: s_during[k] for k in ("p50_ms", "p95_ms", "mean_ms")},
        "server_side_idle": _server_summary(srv_idle),
        "server_side_during": _server_summary(srv_during),
        "qps_1_client": round(qps1, 2),
        f"qps_{args.clients}_clients": round(qpsn, 2),
        f"p50_ms_{args.clients}_clients": round(sum(w["p50_ms"] for w in many) / len(many), 2),
        # The wall-clock queries/s above carry the clients' own CPU (they share the cores with the server):
        # the server's CPU per query alone, and this process's (the clients'), over the same windows.
        "server_cpu_ms_per_query_1_client": _cpu_per_query(one, "server_cpu_ms_per_query"),
        f"server_cpu_ms_per_query_{args.clients}_clients": _cpu_per_query(many, "server_cpu_ms_per_query"),
        "client_cpu_ms_per_query_1_client": _cpu_per_query(one, "client_cpu_ms_per_query"),
        f"client_cpu_ms_per_query_{args.clients}_clients": _cpu_per_query(many, "client_cpu_ms_per_query"),
        "pending_chunks_at_start_of_during": pending_start,
        "pending_chunks_at_end_of_during": pending_end,
        "added_picked_up_after_s": round(picked_up_s, 2),
        "drain_s": round(t_drain.seconds, 1),
        "base_index_build_s": round(t_index.seconds, 1),
        "server_ready_s": round(t_ready.seconds, 1),
        "server_exit_code": rc,
        "windows": windows,
        "idle_samples_ms": [round(x, 2) for x in idle],
        "during_samples_ms": [round(x, 2) for x in during],
    }
    if pending_start <= 0:
        report.notes.append(
            "WARNING: the daemon had no pending chunks when the 'during reindex' phase started; it measured idle"
        )
    elif pending_end <= 0:
        report.notes.append(
            "WARNING: the embedding queue drained before the 'during reindex' phase ended; use more --add-docs"
        )
    if not drained:
        report.notes.append(
            f"WARNING: the queue had not drained after {args.drain_timeout:.0f} s; "
            "the second idle pass ran during embedding"
        )
    report.notes.append("client and server share the 2 cores: the 8-client throughput includes the clients' own CPU")
    report.seconds = time.perf_counter() - t_start
    return report


def main_async(args: argparse.Namespace) -> Report:
    return anyio.run(run, args)
