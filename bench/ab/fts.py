"""this checkout's SQLite search reads against another checkout's, one whole search at a time (decision 0010)

`python -m bench ab fts INDEX --baseline DIR`: an in-process A/B on one index (e.g.
`/tmp/groove-scale/100000/index.sqlite`, built by `python -m bench scale`): the SQLite store's search
module of the checkout in DIR (its `groove/store/sqlite/search.py`, loaded beside this one; it must import
what this checkout's groove still provides, so DIR is a checkout with the store seam of issue 35; before
it, the module was `groove/search/retrievers.py`) and this checkout's, alternating query by query (the
order flips each query) on one read-only connection, through one `Searcher` with one fixed query
vector (the query embedding is the model's and the same for both). Each measures the whole hybrid
search: both full-text legs, the KNN, the row fetch and match spans; over the scale bench's
queries, the same filtered to `scale-rare`, and its worst query 7 times. Which common terms a leg
leaves out is decided above the store (groove/search/fulltext.py), by this checkout's rule for both
sides, from the counts each side's module reads. Prints p50 / p95 per side and baseline-over-this
ratios. Decision 0010 was measured with it (as `python -m bench.fts_ab`).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import numpy as np

from bench.common import BenchError, alternate, data_dir
from bench.scale import RARE_TAG, WORST_QUERY, scale_queries

PARTS = ("trigram_ms", "bigram_ms", "vector_ms")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", type=Path, help="the index file (e.g. /tmp/groove-scale/100000/index.sqlite)")
    p.add_argument("--baseline", type=Path, required=True, metavar="DIR", help="the other checkout (e.g. /work/main)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return anyio.run(measure, args.index, load_baseline(args.baseline), args.data)


def load_baseline(checkout: Path) -> ModuleType:
    """The other checkout's SQLite search module, loaded beside this one."""
    path = checkout / "groove" / "store" / "sqlite" / "search.py"
    if not path.is_file():
        raise BenchError(
            f"{path} does not exist: {checkout} is a checkout from before the store seam (issue 35), whose"
            " groove/search/retrievers.py cannot be loaded beside this checkout's groove"
        )
    spec = importlib.util.spec_from_file_location("baseline_sqlite_search", path)
    if spec is None or spec.loader is None:
        raise BenchError(f"{path} cannot be loaded as a module")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _summary(d: dict[str, list[float]]) -> dict[str, float]:
    total = sorted(d["total"])
    return {
        "p50": round(statistics.median(total), 1),
        "p95": round(total[max(0, int(0.95 * len(total)) - 1)], 1),
        "max": round(total[-1], 1),
        "fts_p50": round(statistics.median(d["fts"]), 1),
        **{k: round(statistics.median(d[k]), 1) for k in PARTS},
    }


async def measure(index: Path, baseline: ModuleType, data: Path | None = None) -> dict[str, Any]:
    from groove.config import SearchSettings
    from groove.search.pipeline import Searcher
    from groove.search.request import SearchRequest
    from groove.store.sqlite import connection
    from groove.store.sqlite import search as this_search
    from groove.store.sqlite.store import SqliteReads

    queries = scale_queries(data_dir(data), 40)
    conn = await connection.connect(index, readonly=True)
    vec = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    vec /= np.linalg.norm(vec)

    async def embed(_text: str) -> np.ndarray:
        return vec

    searcher = Searcher(SearchSettings(), embed)
    mods = {"baseline": baseline, "this": this_search}

    class Reads(SqliteReads):
        """The connection's reads, a search's own (`searching`) through one side's module."""

        def __init__(self, mod: ModuleType):
            super().__init__(conn)
            self.mod = mod

        def searching(self, matrix: Any = None, min_quality: float | None = None) -> Any:
            return self.mod.SqliteSearchReads(self.conn, matrix, min_quality)

    def reading(mod: ModuleType):
        @asynccontextmanager
        async def one():
            yield Reads(mod)

        return one

    jobs: list[tuple[str, str, dict[str, Any]]] = (
        [("warm", q, {}) for q in queries]
        + [("filtered", q, {"tags_any": [RARE_TAG]}) for q in queries]
        + [("worst", WORST_QUERY, {})] * 7
    )
    res: dict[str, dict[str, dict[str, list[float]]]] = {name: {} for name in mods}
    try:
        for q in queries[:4]:  # warm-up: page cache, vocabulary caches
            for mod in mods.values():
                await searcher.search(reading(mod), SearchRequest(query=q, limit=10))
        for j, (kind, q, extra) in enumerate(jobs):
            for name in alternate(["baseline", "this"], j):
                t = time.perf_counter()
                r = await searcher.search(reading(mods[name]), SearchRequest(query=q, limit=10, explain=True, **extra))
                ms = (time.perf_counter() - t) * 1000
                d = res[name].setdefault(kind, {"total": [], "fts": [], **{k: [] for k in PARTS}})
                timings = r["explain"]["timings_ms"]
                d["total"].append(ms)
                for k in PARTS:
                    d[k].append(timings.get(k, 0.0))
                d["fts"].append(timings.get("trigram_ms", 0.0) + timings.get("bigram_ms", 0.0))
    finally:
        await conn.close()
    out = {f"{name}.{kind}": _summary(d) for name in mods for kind, d in res[name].items()}
    for kind in ("warm", "filtered", "worst"):
        a, b = out[f"baseline.{kind}"], out[f"this.{kind}"]
        print(
            f"{kind}\n  baseline {a}\n  this     {b}\n  baseline/this p50 {a['p50'] / b['p50']:.2f}"
            f" p95 {a['p95'] / b['p95']:.2f} full text {a['fts_p50'] / max(b['fts_p50'], 0.1):.2f}",
            flush=True,
        )
    for name in mods:
        print(f"filtered/unfiltered p50, {name}: {out[f'{name}.filtered']['p50'] / out[f'{name}.warm']['p50']:.2f}")
    return out
