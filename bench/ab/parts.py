"""the CPU of each part of a daemon's search, in process, on a scale index (issue 39)

`python -m bench ab parts DIR [--queries N]`: DIR is a size folder of `python -m bench scale` (e.g.
/tmp/groove-scale/10000, with its groove.toml, notes/ and index.sqlite). One read-only `Index` wired as the
daemon is (its in-memory copy of the vectors loaded first), default settings (the quality floor, the
language centres). Per query (the scale bench's, half SciFact, half JaQuAD), each part alone, timed
with `time.process_time()` (every thread of the process): the query embedding; the KNN (the raw and the
language-centred query, mapped to chunks); the candidates' vectors (read back from the store where the
search API has no `vector_legs`, i.e. before issue 39: with it they come with the KNN); the full-text
legs one after another as the pipeline runs each (common terms out, bm25, evidence); then the whole
search, plain and with `explain`. "python" is the whole search less the parts.
Prints the mean and p50 of each in CPU ms. For a before / after, run the same module from another
checkout's working directory (`cd OTHER && PYTHONPATH=. python -m bench ab parts DIR`, with this file
copied there when it has none) on a copy of the index, the sides alternating.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import anyio

PARTS = ("embed", "knn", "fetch", "fulltext", "search", "python", "explain")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="a size folder of the scale bench (e.g. /tmp/groove-scale/10000)")
    p.add_argument("--queries", type=int, default=40, help="scale queries (default 40)")


async def _measure(root: Path, n: int, data: Path) -> dict[str, Any]:
    from bench.common import make_settings
    from bench.scale import scale_queries
    from groove.index import Index
    from groove.search import fulltext, language
    from groove.search.compiler import compile_query
    from groove.search.pipeline import leg_evidence, pool_size
    from groove.search.request import SearchRequest
    from groove.store.memory import VectorMatrix
    from groove.store.sqlite.store import load_all

    settings = make_settings(root, root / "notes", root / "index.sqlite")
    queries = scale_queries(data, n)
    parts: dict[str, list[float]] = {k: [] for k in PARTS}
    async with Index.open(settings, readonly=True) as index:
        s = index.searcher
        s.vectors = VectorMatrix(load_all(index.path), 1 << 40)
        async with index.reading() as reads:
            await s.vectors.usable(reads)
        for q in queries[:3]:
            await index.search(SearchRequest(query=q, limit=10))
        centres = await s.centres_for(index.reading) if settings.search.language_centres else None
        for q in queries:
            req = SearchRequest(query=q, limit=10)
            floor = s.quality_floor(req)
            cq = compile_query(q)
            k = pool_size(req.limit)
            t = time.process_time()
            qvec = await index.embed_query(cq.vector_text)
            parts["embed"].append(time.process_time() - t)
            asked = [(qvec, k)] + ([(centres.query(qvec, cq.vector_text), k * language.WIDEN)] if centres else [])
            async with index.reading() as view:
                store = view.searching(s.vectors, floor)  # as a search reads: the copy, the floor
                t = time.process_time()
                if hasattr(store, "vector_legs"):
                    await store.vector_legs(asked, set(), None)
                    parts["knn"].append(time.process_time() - t)
                    parts["fetch"].append(0.0)
                else:  # before issue 39: one KNN per query, then the candidates' vectors read back
                    legs = [await store.vector_scored(v, depth, set(), None) for v, depth in asked]
                    parts["knn"].append(time.process_time() - t)
                    t = time.process_time()
                    await store.fetch_vectors([cid for leg in legs for cid, _ in leg])
                    parts["fetch"].append(time.process_time() - t)
                fusion = s.settings.fusion
                weights = (fusion.heading_weight, fusion.context_weight, fusion.content_weight)
                t = time.process_time()  # each leg as the pipeline runs it: common terms out, bm25, evidence
                for _, query, terms in fulltext.plan(
                    cq, fulltext.bigram_query(cq.vector_text), cq.match_expr is not None
                ):
                    kept = await fulltext.without_common_terms(store, query)
                    scored = await store.text_scored(kept, k, weights, None, None)
                    await leg_evidence(store, query.kind, terms, scored)
                parts["fulltext"].append(time.process_time() - t)
            t = time.process_time()
            await s.search(index.reading, req)
            parts["search"].append(time.process_time() - t)
            t = time.process_time()
            await s.search(index.reading, req.model_copy(update={"explain": True}))
            parts["explain"].append(time.process_time() - t)
            parts["python"].append(
                parts["search"][-1] - sum(parts[p][-1] for p in ("embed", "knn", "fetch", "fulltext"))
            )
        chunks = (await index.status()).chunks
    out: dict[str, Any] = {"chunks": chunks, "queries": len(queries), "centres": centres is not None}
    for name, got in parts.items():
        out[name] = {
            "mean_cpu_ms": round(statistics.mean(got) * 1000, 2),
            "p50_cpu_ms": round(statistics.median(got) * 1000, 2),
        }
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.common import data_dir

    out = anyio.run(_measure, args.dir, args.queries, data_dir(getattr(args, "data", None)))
    print(f"chunks {out['chunks']}, {out['queries']} queries, language centres {out['centres']}")
    for name in PARTS:
        print(f"{name:9} mean {out[name]['mean_cpu_ms']:7.2f}  p50 {out[name]['p50_cpu_ms']:7.2f}  CPU ms")
    return out
