"""the vector leg from memory against sqlite-vec's scan (decision 0012)

`python -m bench ab vectors INDEX`: on one index (e.g. `/tmp/groove-scale/100000/index.sqlite`,
built by `python -m bench scale`), one read-only connection: the vector leg of a search
(`groove.store.sqlite.search.vector_scored`: KNN, then the ids mapped to chunks) with the process's in-memory
copy (groove/store/memory.py) and without it, alternating query by query (the order flips each
query), unfiltered and filtered to the `scale-rare` tag (1% of notes). Queries are seeded random
unit vectors (the scale index's document vectors are hash-seeded, so what they rank is
meaningless: this measures speed only; the rankings are compared query by query: the share that
are identical, and the largest distance difference at one rank, so an order that differs is seen
to differ only by a float tie). Also the first load's time and the copy's size. Prints p50 / p95
per side and sqlite-vec-over-memory ratios. Decision 0012 was measured with it (as
`python -m bench.vectors_ab`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bench.common import BenchError, alternate, percentile, show_ab
from bench.scale import RARE_TAG


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", type=Path, help="the index file (e.g. /tmp/groove-scale/100000/index.sqlite)")
    p.add_argument("--queries", type=int, default=40, help="random query vectors (default 40)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return show_ab(anyio.run(measure, args.index, args.queries), 42)


async def measure(index: Path, queries: int) -> dict[str, Any]:
    from groove.store.memory import VectorMatrix
    from groove.store.sqlite import connection
    from groove.store.sqlite.search import VectorRows, vector_scored
    from groove.store.sqlite.store import load_all

    conn = await connection.connect(index, readonly=True)
    try:
        cur = await conn.execute("SELECT count(*), (SELECT value FROM meta WHERE key = 'dimension') FROM embeddings")
        n, dim = connection.one(await cur.fetchone())
        rng = np.random.default_rng(12)
        qs = rng.standard_normal((queries, int(dim))).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        cur = await conn.execute("SELECT doc_id FROM doc_tags WHERE tag = ?", (RARE_TAG,))
        rare = [r[0] for r in await cur.fetchall()]
        matrix = VectorMatrix(load_all(index), 2**40)
        t = time.perf_counter()
        snap = await matrix.current(VectorRows(conn))
        load_s = time.perf_counter() - t
        if snap is None:  # the memory side would quietly be sqlite-vec's scan again
            raise BenchError(f"the in-memory copy of {index}'s vectors did not load")
        res: dict[str, list[float]] = {}
        same = 0
        max_gap = 0.0  # the largest distance difference at one rank (a different order is a float tie)
        for kind, allowed in (("unfiltered", None), ("filtered", rare or None)):
            for i, q in enumerate(qs):
                got = {}
                for side in alternate(["sqlite-vec", "memory"], i):
                    t = time.perf_counter()
                    got[side] = await vector_scored(conn, q, 50, None, allowed, matrix if side == "memory" else None)
                    res.setdefault(f"{kind}.{side}", []).append((time.perf_counter() - t) * 1000)
                same += [c for c, _ in got["memory"]] == [c for c, _ in got["sqlite-vec"]]
                # the ranks both sides have (a side may find fewer than 50)
                pairs = zip(got["memory"], got["sqlite-vec"], strict=False)
                gap = max((abs(a[1] - b[1]) for a, b in pairs), default=0.0)
                max_gap = max(max_gap, gap)
    finally:
        await conn.close()
    out: dict[str, Any] = {
        "vectors": n,
        "dimension": int(dim),
        "rare_notes": len(rare),
        "queries": queries,
        "first_load_s": round(load_s, 2),
        "memory_mb": round(snap.matrix.nbytes / 2**20, 1),
        "same_ranking_share": round(same / (2 * queries), 3),
        "max_distance_gap_at_a_rank": float(f"{max_gap:.2g}"),
    }
    for key, xs in res.items():
        out[key] = {"p50_ms": round(percentile(xs, 50), 2), "p95_ms": round(percentile(xs, 95), 2)}
    for kind in ("unfiltered", "filtered"):
        out[f"{kind}.sqlite_vec_over_memory_p50"] = round(
            out[f"{kind}.sqlite-vec"]["p50_ms"] / out[f"{kind}.memory"]["p50_ms"], 2
        )
    return out
