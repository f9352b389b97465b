"""`throughput`: the server's CPU per search at 1/4/8/16 clients over Streamable HTTP vs the bare CPU of its parts.

The machine is shared, so this bench counts CPU seconds, not wall time:

1. **Bare work, in this process**, read the way the server reads: one read-only
   `Index` wired as the daemon is (its in-memory copy of the vectors, loaded
   first, decision 0012; the quality floor; the language centres), as `python
   -m bench ab parts` measures. For each query, each part alone, timed with
   `time.process_time()` (every thread of the process, so the model's own
   threads and aiosqlite's thread count): the full-text legs (every leg of the
   plan, common terms out, bm25 and evidence, one after another), the query
   embedding (one text per call) and the KNN (the raw and the language-centred
   query in one pass over the in-memory copy, `vector_legs`, with the
   candidates' vectors). Their sum per query is the *bare CPU per query*; the
   CPU limit is `cores / bare CPU per query` queries a second. The same
   queries also run through `Index.search` in process (`inproc`), which adds
   fusion, the row fetch, spans and the pending count, and through the model
   in batches of 8 (`embed_batch8`), the cheapest a query vector gets. The
   queries are half SciFact (English), half JaQuAD (Japanese), alternating
   (`bench.scale.scale_queries`), here and for the server.
2. **The real server**: `groove serve --transport http` (a subprocess) on a
   copy of the index; `--clients` concurrent `mcp.Client` sessions send the
   queries back to back for `--seconds` per window, in the order given and
   then reversed (1 4 8 16 16 8 4 1), so that drifting load falls on both
   halves. The server's CPU (utime + stime from `/proc/<pid>/stat`) is read
   before a window starts and after its last call has returned: *server CPU
   per query* = CPU / queries answered. The bench process's own CPU per query
   (the clients) is reported beside it.

`efficiency = bare CPU per query / server CPU per query`: 1.0 means the
server spends on a search exactly what its parts cost alone, so its
CPU-bound throughput is the limit; above 1, query batching saves more than
the server adds. `cpu_bound_qps = cores / server CPU per query` is the
throughput the server's own CPU allows, which is what the clients' wall-clock
queries per second would show on a machine with nothing else running.

`--baseline DIR` also serves the same index with the groove checkout in DIR
(its `.venv/bin/python` if it has one, else this Python with DIR first on the
path), the two servers' windows interleaved, so before and after are measured
in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from bench.common import (
    BenchError,
    Report,
    convert_scifact,
    data_dir,
    machine,
    make_settings,
    ratio,
    settings_summary,
)

DEFAULT_CLIENTS = "1,4,8,16"
DEFAULT_SECONDS = 10.0
DEFAULT_QUERIES = 200
DEFAULT_DOCS = 300
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# The user's own OpenMP policy, before this process loads a model (groove then sets one in os.environ,
# which every server this bench starts would inherit: the baseline must get the environment as given).
USER_OMP_WAIT_POLICY = os.environ.get("OMP_WAIT_POLICY")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kb", type=Path, help="an existing notes folder (copied to a tmp folder with --index; never written)"
    )
    p.add_argument("--index", type=Path, help="its index (copied; never written)")
    p.add_argument(
        "--docs",
        type=int,
        default=DEFAULT_DOCS,
        help=f"without --kb/--index: SciFact docs to index first (default {DEFAULT_DOCS})",
    )
    p.add_argument(
        "--clients",
        default=DEFAULT_CLIENTS,
        help=f"client counts, comma-separated (default {DEFAULT_CLIENTS}); run in order, then reversed",
    )
    p.add_argument(
        "--seconds", type=float, default=DEFAULT_SECONDS, help=f"length of each window (default {DEFAULT_SECONDS:g} s)"
    )
    p.add_argument(
        "--queries",
        type=int,
        default=DEFAULT_QUERIES,
        help=f"queries used, half SciFact, half JaQuAD (default {DEFAULT_QUERIES})",
    )
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="DIR",
        help="also serve the index with the groove checkout in DIR, windows interleaved",
    )
    p.add_argument(
        "--no-reverse", action="store_true", help="run the client counts once, not in order and then reversed"
    )
    p.add_argument(
        "--policies",
        type=int,
        default=0,
        metavar="N",
        help=(
            "also measure the query embedding's CPU under each OpenMP wait policy on N queries, "
            "a process each (default 0: not)"
        ),
    )


def parse_clients(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BenchError(f"--clients takes comma-separated numbers like 1,4,8,16, got {text!r}") from None
    if not out or any(c < 1 for c in out):
        raise BenchError(f"--clients takes numbers of at least 1, got {text!r}")
    return out


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds (Linux /proc)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)


# --- 1. bare work in process -------------------------------------------------------------------


async def bare_cpu(settings, index: Path, queries: list[str]) -> dict[str, Any]:
    """CPU seconds per query of each part alone, read the way the server reads them, and of the whole search
    in process: one read-only `Index` wired as the daemon is (its in-memory copy of the vectors loaded first,
    the quality floor, the language centres), as `python -m bench ab parts` measures them."""
    from groove.index import Index
    from groove.search import fulltext, language
    from groove.search.compiler import QueryError, compile_query
    from groove.search.pipeline import leg_evidence, pool_size
    from groove.search.request import SearchRequest

    cpu = {"fts": 0.0, "embed": 0.0, "knn": 0.0}
    async with Index.open(settings, readonly=True) as idx:
        s = idx.searcher
        assert idx.store is not None
        s.vectors = idx.store.vector_memory(settings.search.vector_memory_mb * 2**20)  # as the daemon keeps them
        async with idx.reading() as reads:
            in_memory = await s.vectors.usable(reads) is not None
        for q in queries[:3]:  # warm up: the model, the page cache, the calibration and the centres (untimed)
            await idx.search(SearchRequest(query=q, limit=10))
        centres = await s.centres_for(idx.reading) if settings.search.language_centres else None
        fusion = s.settings.fusion
        weights = (fusion.heading_weight, fusion.context_weight, fusion.content_weight)
        texts = []
        for q in queries:
            req = SearchRequest(query=q, limit=10)
            try:
                cq = compile_query(q)
            except QueryError:
                texts.append(q)
                continue
            texts.append(cq.vector_text)
            n = pool_size(req.limit)
            async with idx.reading() as view:
                store = view.searching(s.vectors, s.quality_floor(req))  # as a search reads: the copy, the floor
                t = time.process_time()  # each leg as the pipeline runs it: common terms out, bm25, evidence
                for _name, query, terms in fulltext.plan(cq, fulltext.bigram_query(cq.vector_text)):
                    kept = await fulltext.without_common_terms(store, query)
                    scored = await store.text_scored(kept, n, weights, None, None)
                    await leg_evidence(store, query.kind, terms, scored)
                cpu["fts"] += time.process_time() - t
                t = time.process_time()
                qvec = await idx.embed_query(cq.vector_text)
                cpu["embed"] += time.process_time() - t
                asked = [(qvec, n)]
                if centres is not None:
                    asked.append((centres.query(qvec, cq.vector_text), n * language.WIDEN))
                t = time.process_time()  # the raw and the centred KNN in one pass, with the candidates' vectors
                await store.vector_legs(asked, set(), None)
                cpu["knn"] += time.process_time() - t
        t = time.process_time()
        for i in range(0, len(texts), 8):
            idx.embedder.embed_queries(texts[i : i + 8])
        embed8 = time.process_time() - t
        t = time.process_time()
        for q in queries:
            await idx.search(SearchRequest(query=q, limit=10))
        inproc = time.process_time() - t
    k = len(queries)
    per = {name: v / k * 1000 for name, v in cpu.items()}
    return {
        "fts_ms": round(per["fts"], 2),
        "embed_ms": round(per["embed"], 2),
        "knn_ms": round(per["knn"], 2),
        "bare_ms": round(sum(per.values()), 2),
        "embed_batch8_ms": round(embed8 / k * 1000, 2),
        "bare_batch8_ms": round(per["fts"] + per["knn"] + embed8 / k * 1000, 2),
        "inproc_search_ms": round(inproc / k * 1000, 2),
        "vectors_in_memory": in_memory,
        "language_centres": centres is not None,
    }


# --- 1b. the query embedding's CPU under each OpenMP wait policy (child processes) ---------------

POLICY_SCRIPT = r"""
import json, sys, time
from groove.config import load_settings
from groove.embed.embedder import make_embedder
texts = json.loads(sys.stdin.read())
e = make_embedder(load_settings(None).embedding)
e.embed_queries(["warm up the model"])
t = time.process_time()
for q in texts:
    e.embed_queries([q])
one = time.process_time() - t
t = time.process_time()
for i in range(0, len(texts), 8):
    e.embed_queries(texts[i:i + 8])
eight = time.process_time() - t
print(json.dumps({"embed_ms": one / len(texts) * 1000, "embed_batch8_ms": eight / len(texts) * 1000}))
"""
POLICIES = {"groove (passive unless set)": None, "OpenMP default (spin, then sleep)": "", "active": "ACTIVE"}


def policy_cpu(queries: list[str]) -> dict[str, dict[str, float]]:
    """CPU per query embedding, one at a time and in batches of 8, in a fresh process per policy
    (OpenMP reads the policy once, when its library loads). The OpenMP default is measured by
    removing groove's choice: GOMP's own default, with OMP_WAIT_POLICY unset, is simulated by
    `OMP_WAIT_POLICY=` (empty), which libgomp ignores like an unset variable."""
    import subprocess

    out = {}
    for name, value in POLICIES.items():
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if value is not None:
            env["OMP_WAIT_POLICY"] = value
        done = subprocess.run(
            [sys.executable, "-c", POLICY_SCRIPT],
            input=json.dumps(queries),
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
            timeout=1800,
        )
        if done.returncode != 0:
            raise BenchError(f"the embedding CPU child failed: {done.stderr[-1500:]}")
        out[name] = {k: round(v, 2) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    return out


# --- 2. the server -----------------------------------------------------------------------------


async def window(server, queries: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """`clients` sessions (opened first), each sending its own slice of the queries back to back."""
    from mcp import Client

    done = [0] * clients
    async with AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(Client(server.url)) for _ in range(clients)]
        for k, session in enumerate(sessions):  # one call each: the session's first-call costs are not counted
            await session.call_tool("search", {"query": queries[k % len(queries)], "limit": 10})
        t_end = 0.0
        start = anyio.Event()

        async def worker(k: int) -> None:
            mine = queries[k::clients] or queries
            await start.wait()
            j = 0
            while time.perf_counter() < t_end:
                result = await sessions[k].call_tool("search", {"query": mine[j % len(mine)], "limit": 10})
                if result.is_error:
                    raise BenchError(f"search tool error: {result.content}")
                done[k] += 1
                j += 1

        cpu0, own0 = proc_cpu_s(server.proc.pid), time.process_time()
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for k in range(clients):
                tg.start_soon(worker, k)
            t_end = t0 + seconds
            start.set()
        wall = time.perf_counter() - t0
        cpu, own = proc_cpu_s(server.proc.pid) - cpu0, time.process_time() - own0
    total = sum(done)
    return {
        "clients": clients,
        "queries": total,
        "wall_s": round(wall, 2),
        "server_cpu_s": round(cpu, 2),
        "client_cpu_s": round(own, 2),
        "qps": round(total / wall, 2) if wall else 0.0,
    }


async def idle_cpu(server, seconds: float = 3.0) -> float:
    """The server's CPU seconds per second with no client: what a window's figure carries besides searches."""
    c0 = proc_cpu_s(server.proc.pid)
    await anyio.sleep(seconds)
    return round((proc_cpu_s(server.proc.pid) - c0) / seconds, 4)


def _per_clients(windows: list[dict], cores: int, bare_ms: float) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for c in dict.fromkeys(w["clients"] for w in windows):
        ws = [w for w in windows if w["clients"] == c]
        q = sum(w["queries"] for w in ws)
        cpu_ms = sum(w["server_cpu_s"] for w in ws) * 1000 / q if q else float("nan")
        out[c] = {
            "queries": q,
            "server_cpu_ms_per_query": round(cpu_ms, 2),
            "client_cpu_ms_per_query": round(sum(w["client_cpu_s"] for w in ws) * 1000 / q, 2) if q else float("nan"),
            "efficiency": ratio(bare_ms, cpu_ms),
            "cpu_bound_qps": round(cores * 1000 / cpu_ms, 2) if q else float("nan"),
            "wall_qps": round(q / sum(w["wall_s"] for w in ws), 2),
        }
    return out


def table(label: str, per: dict[int, dict], bare: dict, cores: int) -> str:
    limit = cores * 1000 / bare["bare_ms"]
    knn = "in memory" if bare.get("vectors_in_memory") else "sqlite-vec"
    lines = [
        f"{label}: bare CPU {bare['bare_ms']:.1f} ms/query (FTS {bare['fts_ms']:.1f} + embedding {bare['embed_ms']:.1f}"
        f" + KNN {bare['knn_ms']:.1f}, {knn}); CPU limit {cores} cores / bare = {limit:.1f} q/s",
        f"{'clients':>7} {'queries':>7} {'server CPU ms/q':>15} {'efficiency':>10} {'CPU-bound q/s':>13} "
        f"{'% of limit':>10} {'wall q/s':>8} {'client CPU ms/q':>15}",
    ]
    for c, r in per.items():
        lines.append(
            f"{c:>7} {r['queries']:>7} {r['server_cpu_ms_per_query']:>15.1f} {r['efficiency']:>10.3f}"
            f" {r['cpu_bound_qps']:>13.1f} {100 * r['cpu_bound_qps'] / limit:>9.0f}% {r['wall_qps']:>8.1f}"
            f" {r['client_cpu_ms_per_query']:>15.1f}"
        )
    return "\n".join(lines)


def _baseline_python(baseline: Path) -> str:
    venv = baseline / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


async def run(args: argparse.Namespace) -> Report:
    from bench.http import Server, serve_available
    from tests.support.oneshot import index_once

    t_start = time.perf_counter()
    m0 = machine()
    data = data_dir(args.data)
    clients = parse_clients(args.clients)
    order = clients if args.no_reverse else clients + clients[::-1]
    if not await anyio.to_thread.run_sync(serve_available):
        raise BenchError("`groove serve --transport http` does not exist in this groove")
    if bool(args.kb) != bool(args.index):
        raise BenchError("give --kb and --index together (an existing notes folder and its index), or neither")
    queries = [q for q in _queries(data, args.queries)]
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="groove-bench-throughput-") as tmp_s:
        tmp = Path(tmp_s)
        kb, index = tmp / "notes", tmp / "index.sqlite"
        if args.kb:
            if not args.kb.is_dir() or not args.index.is_file():
                raise BenchError(f"--kb must be a folder and --index a file: {args.kb}, {args.index}")
            shutil.copytree(args.kb, kb)
            shutil.copy2(args.index, index)
            docs = sum(1 for _ in kb.rglob("*.md"))
            settings = make_settings(tmp, kb, index)
        else:
            docs = convert_scifact(data, kb, args.docs, scratch=tmp / "scratch")
            settings = make_settings(tmp, kb, index)
            await index_once(settings)
        bare = await bare_cpu(settings, index, queries)
        policies = await anyio.to_thread.run_sync(policy_cpu, queries[: args.policies]) if args.policies else {}

        servers = [("this", sys.executable, Path.cwd())]
        if args.baseline:
            base_index = tmp / "baseline.sqlite"
            shutil.copy2(index, base_index)  # its own copy: each server opens its index as the writer
            servers.insert(0, ("baseline", _baseline_python(args.baseline), args.baseline.resolve()))
        if USER_OMP_WAIT_POLICY is None:
            os.environ.pop("OMP_WAIT_POLICY", None)  # this process's OpenMP has read it already
        else:
            os.environ["OMP_WAIT_POLICY"] = USER_OMP_WAIT_POLICY
        running: dict[str, Any] = {}
        windows: dict[str, list[dict]] = {label: [] for label, _, _ in servers}
        idle: dict[str, float] = {}
        try:
            for label, python, cwd in servers:
                idx = tmp / "baseline.sqlite" if label == "baseline" else index
                srv = Server(tmp / "groove.toml", kb, idx, tmp / f"serve-{label}.log", python=python, cwd=cwd)
                running[label] = srv
                await srv.wait_ready()
                await window(srv, queries, 1, 1.0)  # warm up: model, connections, page cache
            for label, srv in running.items():
                idle[label] = await idle_cpu(srv)
            for i, c in enumerate(order):
                labels = list(running) if i % 2 == 0 else list(running)[::-1]
                for label in labels:
                    windows[label].append(await window(running[label], queries, c, args.seconds))
        finally:
            codes = {label: srv.stop() for label, srv in running.items()}

    per = {label: _per_clients(ws, cores, bare["bare_ms"]) for label, ws in windows.items()}
    report = Report(
        bench="throughput",
        machine_start=m0,
        title=(
            f"server CPU per search at {'/'.join(map(str, clients))} clients over Streamable HTTP "
            "vs the bare CPU of its parts"
        ),
        params={
            "docs": docs,
            "queries": len(queries),
            "window_s": args.seconds,
            "clients": args.clients,
            "cores": cores,
            "index": str(args.index) if args.index else f"{args.docs} SciFact docs",
            "baseline": str(args.baseline) if args.baseline else None,
            **settings_summary(settings),
        },
    )
    for label in per:
        for c, r in per[label].items():
            report.ratios[f"{label}_efficiency_{c}_clients"] = r["efficiency"]
    if args.baseline:
        for c in clients:
            report.ratios[f"server_cpu_baseline_over_this_{c}_clients"] = ratio(
                per["baseline"][c]["server_cpu_ms_per_query"], per["this"][c]["server_cpu_ms_per_query"]
            )
    report.ratios["inproc_search_over_bare"] = ratio(bare["inproc_search_ms"], bare["bare_ms"])
    report.ratios["embed_batch8_over_embed_one"] = ratio(bare["embed_batch8_ms"], bare["embed_ms"])
    report.raw = {
        "bare_cpu_ms_per_query": bare,
        "cpu_limit_qps": round(cores * 1000 / bare["bare_ms"], 2),
        "server_idle_cpu_s_per_s": idle,
        "server_exit_codes": codes,
        "embed_cpu_ms_by_openmp_policy": policies,
        **{label: {str(c): r for c, r in p.items()} for label, p in per.items()},
    }
    report.raw["windows"] = windows  # lists go to the JSON only
    for label in per:
        report.notes.append("\n" + table(label, per[label], bare, cores))
    report.notes.append(
        "CPU = utime + stime of the server process over each window (all its threads); the clients run in this "
        "process and their CPU is the last column"
    )
    report.seconds = time.perf_counter() - t_start
    return report


def _queries(data: Path, n: int) -> list[str]:
    from bench.scale import scale_queries

    return list(dict.fromkeys(scale_queries(data, n)))


def main_async(args: argparse.Namespace) -> Report:
    return anyio.run(run, args)
