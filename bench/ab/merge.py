"""the full-text legs on an index as written against the same index merged (decision 0013)

`python -m bench ab merge INDEX`: copies INDEX (e.g. `/tmp/groove-scale/10000/index.sqlite`,
built by `python -m bench scale`) to a scratch file, merges the copy's full-text tables into one
segment each (FTS5 `optimize`, what `groove index` does after a large write: decision 0013;
timed), then runs the trigram and bigram legs (`bench.common.full_text_leg`: common terms left out, then
FTS5's bm25, as a search runs them) of the scale bench's
queries on the original and on the copy, alternating query by query (the order flips each query),
three rounds, the first one a warm-up. Prints p50 / mean per side and original-over-merged ratios.
The ranked ids are compared: a merge moves postings, it must not change a result. Decision 0013
was measured with it (as `python -m bench.merge_ab`).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from bench.common import alternate, data_dir, full_text_leg, show_ab
from bench.scale import scale_queries


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", type=Path, help="the index file (e.g. /tmp/groove-scale/10000/index.sqlite)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return show_ab(anyio.run(measure, args.index, args.data))


async def measure(index: Path, data: Path | None = None) -> dict[str, Any]:
    from groove.search import fulltext
    from groove.search.compiler import compile_query
    from groove.store.protocols import TextQuery
    from groove.store.sqlite import connection
    from groove.store.sqlite.schema import FTS_TABLES

    queries = scale_queries(data_dir(data), 40)
    with tempfile.TemporaryDirectory(prefix="groove-merge-ab-") as tmp:
        copy = Path(tmp) / "merged.sqlite"
        shutil.copyfile(index, copy)
        con = connection.connect_sync(copy)
        merge_s = {}
        for table in FTS_TABLES:
            t = time.perf_counter()
            con.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            merge_s[table] = round(time.perf_counter() - t, 2)
        con.close()
        sides = {
            "as_written": await connection.connect(index, readonly=True),
            "merged": await connection.connect(copy, readonly=True),
        }
        res: dict[str, list[float]] = {name: [] for name in sides}
        same = True
        try:
            for rnd in range(3):
                for i, q in enumerate(queries):
                    cq = compile_query(q)
                    trigram = TextQuery("phrases", cq.positives, excluded=cq.negatives) if cq.match_expr else None
                    legs = [q for q in (trigram, fulltext.bigram_query(cq.vector_text)) if q is not None]
                    got = {}
                    for name in alternate(["as_written", "merged"], i + rnd):
                        t = time.perf_counter()
                        got[name] = [await full_text_leg(sides[name], leg, 50) for leg in legs]
                        if rnd:
                            res[name].append((time.perf_counter() - t) * 1000)
                    same &= got["as_written"] == got["merged"]
        finally:
            for conn in sides.values():
                await conn.close()
    out: dict[str, Any] = {"index": str(index), "queries": len(queries), "merge_s": merge_s, "same_results": same}
    for name, xs in res.items():
        out[name] = {"p50_ms": round(statistics.median(xs), 1), "mean_ms": round(statistics.mean(xs), 1)}
    out["as_written_over_merged_p50"] = round(out["as_written"]["p50_ms"] / out["merged"]["p50_ms"], 3)
    out["as_written_over_merged_mean"] = round(out["as_written"]["mean_ms"] / out["merged"]["mean_ms"], 3)
    return out
