"""warm search over HTTP, another checkout against this one, each serving its own index (decision 0014)

`python -m bench ab serve INDEX --baseline DIR --baseline-index PATH`: for an A/B across a schema
change, which `bench scale --baseline` cannot do (it serves one index file with both checkouts,
and an older groove refuses a newer schema): each side serves its own copy of the same notes'
index (e.g. this checkout `/tmp/groove-scale/100000/index.sqlite`, the baseline a copy at its own
schema), one server at a time, sides alternating over `--rounds` (main, this, then this, main,
...). Each server: start, one search, then wait until its startup reconcile is done (the
`index_status` tool; the scan of 90k notes is about 5 s of CPU), 5 warm-up searches, then the
scale bench's 40 queries (half English, half Japanese). Reported per round: client p50 (all,
English, Japanese) and p95 and the server process's CPU per search (its utime + stime from /proc), all of
plain searches as a client sends them; then the server's own pipeline total p50 from a pass of the same
queries with `explain`, untimed. Was `python -m bench.serve_ab`.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

import anyio

from bench.common import alternate, data_dir, percentile
from bench.http import Server
from bench.scale import _search, scale_queries, settled


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", type=Path, help="this checkout's index (its folder holds groove.toml and notes/)")
    p.add_argument(
        "--baseline", type=Path, required=True, metavar="DIR", help="the other checkout (its .venv/bin/python)"
    )
    p.add_argument(
        "--baseline-index", type=Path, required=True, metavar="PATH", help="the baseline's copy of the index"
    )
    p.add_argument("--rounds", type=int, default=2, help="rounds, the sides alternating (default 2)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return anyio.run(measure, args)


def _cpu_ms(pid: int) -> int:
    """The process's utime + stime: every thread's, those that have ended included."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 // os.sysconf("SC_CLK_TCK")


async def serve_once(python: str, cwd: Path, index: Path, root: Path, queries: list[str], log: Path) -> dict[str, Any]:
    from mcp import Client

    from groove.corpus.cjk import has_cjk

    server = Server(root / "groove.toml", root / "notes", index, log, python=python, cwd=cwd)
    await server.wait_ready()
    try:
        async with Client(server.url) as client:
            await _search(client, queries[0])
            await settled(client)
            for q in queries[:5]:
                await _search(client, q)
            before = _cpu_ms(server.proc.pid)
            lat: dict[str, list[float]] = {"all": [], "en": [], "ja": []}
            totals = []
            for q in queries:
                ms, _ = await _search(client, q)
                lat["all"].append(ms)
                lat["ja" if has_cjk(q) else "en"].append(ms)
            used = _cpu_ms(server.proc.pid) - before
            for q in queries:  # the server's own timings: explain, after the timed pass
                _, body = await _search(client, q, explain=True)
                totals.append(body["explain"]["timings_ms"]["total_ms"])
    finally:
        server.stop()
    out: dict[str, Any] = {f"p50_{k}_ms": round(percentile(v, 50), 1) for k, v in lat.items() if v}
    out["p95_ms"] = round(percentile(lat["all"], 95), 1)
    out["server_total_p50_ms"] = round(percentile(totals, 50), 1)
    out["cpu_ms_per_search"] = round(used / len(queries), 1)
    out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    return out


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    queries = scale_queries(data_dir(args.data), 40)
    root = args.index.parent
    sides = {
        "baseline": (str(args.baseline / ".venv" / "bin" / "python"), args.baseline, args.baseline_index),
        "this": (str(Path.cwd() / ".venv" / "bin" / "python"), Path.cwd(), args.index),
    }
    res: dict[str, list[dict]] = {}
    for rnd in range(args.rounds):
        for name in alternate(["baseline", "this"], rnd):
            python, cwd, index = sides[name]
            r = await serve_once(python, cwd, index, root, queries, Path(f"/tmp/groove-serve-ab-{name}.log"))
            res.setdefault(name, []).append(r)
            print(f"round {rnd} {name:8} {r}", flush=True)
    p50 = {name: statistics.median(r["p50_all_ms"] for r in rs) for name, rs in res.items()}
    out = {"rounds": res, "baseline_over_this_p50": round(p50["baseline"] / p50["this"], 3)}
    print(f"baseline / this, warm p50 (median of rounds): {out['baseline_over_this_p50']}")
    return out
