"""`python -m bench.path_ab INDEX`: a whole search with the in-memory vectors and the two-reader legs, and without.

In process, on one index (e.g. `/tmp/groove-scale/100000/index.sqlite`), one reader pool of
four connections, one `Searcher` per side, alternating query by query (the order flips each
query):

- `plain`: KNN by sqlite-vec's scan, the trigram and bigram legs one after the other on one reader;
- `this`: KNN on the process's in-memory copy (decision 0012), the two legs at once on two
  readers when a second is free (the daemon's path).

Each search embeds its query with the real default model in a worker thread, as the daemon
does, so the model's CPU competes with the full-text half for the two cores exactly as in a
served search; alternating the sides evens out the model's own variance. The bench's queries are half English and half Japanese, and each
language is reported apart: English queries run the trigram leg alone, Japanese ones both
legs. Prints p50 / p95 per side and the plain-over-this ratios; `--json PATH` writes them.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bench.common import data_dir, percentile, show_ab
from bench.scale import _queries
from groove.config import EmbeddingSettings, SearchSettings
from groove.corpus.cjk import has_cjk
from groove.embed.embedder import make_embedder
from groove.search.compiler import compile_query
from groove.search.pipeline import Searcher
from groove.search.request import SearchRequest
from groove.store.interface import VECTOR_TABLE
from groove.store.pool import ReaderPool
from groove.store.vectors import VectorMatrix



async def main(index: Path, n_queries: int, out_path: Path | None, data: Path | None = None,
               threads: int = 0) -> dict[str, Any]:
    queries = _queries(data_dir(data), n_queries)
    model = make_embedder(EmbeddingSettings(threads=threads))
    model.embed_queries(["warm up"])
    alone = []
    for q in queries:  # the model's own time per query, for the report
        t = time.perf_counter()
        model.embed_queries([compile_query(q).vector_text])
        alone.append(time.perf_counter() - t)

    async def embed_by_text(text: str) -> np.ndarray:
        return (await anyio.to_thread.run_sync(model.embed_queries, [text]))[0]

    pool = ReaderPool(index, size=4)
    matrix = VectorMatrix(index, VECTOR_TABLE, 2**40)
    sides = {
        "plain": (Searcher(SearchSettings(), embed_query=embed_by_text), None),
        "this": (Searcher(SearchSettings(), embed_query=embed_by_text, vectors=matrix), pool.spare),
    }
    res: dict[str, list[float]] = {}
    try:
        async with pool.connection() as conn:
            await matrix.current(conn)  # the daemon loads it at start
        for q in queries[:4]:  # warm-up: page cache, vocabulary caches
            for searcher, spare in sides.values():
                await searcher.search(pool.connection, SearchRequest(query=q), spare=spare)
        for rnd in range(2):
            for i, q in enumerate(queries):
                lang = "ja" if has_cjk(q) else "en"
                for name in (["plain", "this"] if (i + rnd) % 2 == 0 else ["this", "plain"]):
                    searcher, spare = sides[name]
                    t = time.perf_counter()
                    await searcher.search(pool.connection, SearchRequest(query=q), spare=spare)
                    res.setdefault(f"{lang}.{name}", []).append((time.perf_counter() - t) * 1000)
                    res.setdefault(f"all.{name}", []).append(res[f"{lang}.{name}"][-1])
    finally:
        await pool.close()
    out: dict[str, Any] = {"index": str(index), "queries": len(queries), "threads": threads,
                           "embed_alone_ms_p50": round(1000 * statistics.median(alone), 1)}
    for key, xs in sorted(res.items()):
        out[key] = {"p50_ms": round(percentile(xs, 50), 1), "p95_ms": round(percentile(xs, 95), 1), "n": len(xs)}
    for lang in ("all", "en", "ja"):
        out[f"{lang}.plain_over_this_p50"] = round(out[f"{lang}.plain"]["p50_ms"] / out[f"{lang}.this"]["p50_ms"], 3)
    return show_ab(out, out_path, 28)


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench.path_ab", description=__doc__.splitlines()[0])
    p.add_argument("index", type=Path, help="the index file (e.g. /tmp/groove-scale/100000/index.sqlite)")
    p.add_argument("--queries", type=int, default=40, help="bench queries, half English, half Japanese (default 40)")
    p.add_argument("--data", type=Path, default=None, metavar="DIR", help="the folder holding scifact/ and jaquad/")
    p.add_argument("--threads", type=int, default=0, help="[embedding] threads for the model (default 0: the library's own)")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures as JSON")
    a = p.parse_args()
    anyio.run(lambda: main(a.index, a.queries, a.json, a.data, a.threads))
