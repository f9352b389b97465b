"""the vector leg of a mixed-language index: raw cosine against the language centres (decision 0019)

`python -m bench ab centres INDEX`: on one read-only connection to INDEX (an index of Japanese and
English notes, e.g. JaQuAD and SciFact sub-corpora indexed together), for each of the scale
bench's 40 queries (half English, half Japanese), embedded once up front, runs the vector leg
two ways, alternating query by query (the order flips each query), three rounds, the first one a
warm-up:

- "raw": one KNN with the query vector (a one-language index, or `language_centres = false`);
- "centres": what a search of a mixed index runs (search/language.py): the same KNN, a second
  one with the centred query for three times the pool, the union's vectors fetched and scored.

Both through sqlite-vec's scan (a one-shot command) and through the in-memory copy of the
vectors (the daemon, `groove eval`). Prints p50 per side and the centres-over-raw ratios; also
how often the two sides' top 10 differ. Quality is `groove eval`'s (docs/decisions/0019), not this.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import anyio

from bench.common import alternate, data_dir, reading_of, show_ab
from bench.scale import scale_queries

POOL = 50


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", type=Path, help="an index of notes in two languages")
    p.add_argument("--rounds", type=int, default=3, help="rounds over the queries, the first a warm-up (default 3)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return show_ab(anyio.run(measure, args.index, args.data, args.rounds))


async def measure(index: Path, data: Path | None = None, rounds: int = 3) -> dict[str, Any]:
    import numpy as np

    from groove.config import load_settings
    from groove.embed.embedder import make_embedder
    from groove.search import language
    from groove.search.pipeline import Searcher
    from groove.store.memory import VectorMatrix
    from groove.store.sqlite import connection
    from groove.store.sqlite.search import SqliteSearchReads
    from groove.store.sqlite.store import load_all

    queries = scale_queries(data_dir(data), 40)
    settings = load_settings(None, kb_path=index.parent, index_path=index)
    embedder = make_embedder(settings.embedding)
    vectors = await anyio.to_thread.run_sync(embedder.embed_queries, queries)
    conn = await connection.connect(index, readonly=True)

    async def no_embedding(text: str) -> np.ndarray:
        raise RuntimeError("this searcher embeds nothing: only its centres are used")

    searcher = Searcher(settings.search, embed_query=no_embedding)  # only its centres are used
    try:
        centres = await searcher.centres_for(reading_of(conn))
        if centres is None:
            raise SystemExit(f"{index} holds one language: it has no centres to compare against")
        matrix = VectorMatrix(load_all(index), settings.search.vector_memory_mb * 2**20)
        ms: dict[str, list[float]] = {f"{side}_{how}": [] for side in ("raw", "centres") for how in ("scan", "memory")}
        differ = 0
        for r in range(rounds):
            for i, (text, q) in enumerate(zip(queries, vectors, strict=True)):
                for how, reads_ in (("scan", SqliteSearchReads(conn)), ("memory", SqliteSearchReads(conn, matrix))):
                    tops = {}
                    for side in alternate(("raw", "centres"), i):
                        t = time.perf_counter()
                        near = await reads_.vector_scored(q, POOL)
                        if side == "centres":
                            across = await reads_.vector_scored(centres.query(q, text), POOL * language.WIDEN)
                            cands = [c for c, _ in near] + [c for c, _ in across]
                            got = await reads_.fetch_vectors(cands)
                            near = language.rerank(centres, q, text, cands, got, POOL)
                        took = (time.perf_counter() - t) * 1000
                        tops[side] = [c for c, _ in near[:10]]
                        if r:
                            ms[f"{side}_{how}"].append(took)
                    if r == rounds - 1 and how == "memory":
                        differ += tops["raw"] != tops["centres"]
    finally:
        await conn.close()
    p50 = {k: round(statistics.median(v), 3) for k, v in ms.items()}
    return {
        "queries": len(queries),
        "centres": centres.describe(),
        **{f"p50_ms_{k}": v for k, v in p50.items()},
        "centres_over_raw_scan": round(p50["centres_scan"] / p50["raw_scan"], 3),
        "centres_over_raw_memory": round(p50["centres_memory"] / p50["raw_memory"], 3),
        "top10_differs_share": round(differ / len(queries), 3),
        "embedding_dims": int(np.asarray(vectors).shape[1]),
    }
