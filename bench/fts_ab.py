"""`python -m bench.fts_ab INDEX --baseline DIR`: this checkout's retrievers against another's, query by query.

An in-process A/B on one index (e.g. `/tmp/groove-scale/100000`, built by `python -m bench
scale`): the retrievers module of the checkout in DIR (its `groove/search/retrievers.py`,
loaded beside this one; it must import what this checkout's groove still provides) and this
checkout's, alternating query by query (the order flips each query) on one read-only
connection, through one `Searcher` with one fixed query vector (the query embedding is the
model's and the same for both). Each measures the whole hybrid search: both full-text legs,
the KNN, the row fetch and match spans; over the scale bench's queries, the same filtered to
`scale-rare`, and its worst query 7 times. Prints p50 / p95 per side and baseline-over-this
ratios; `--json PATH` writes them. Decision 0010 was measured with it.
"""
import argparse
import sys, time, statistics, asyncio, importlib.util, json
from contextlib import asynccontextmanager
import numpy as np
from pathlib import Path
from groove.store import db
from groove.config import SearchSettings
from groove.search import retrievers as new
from groove.search.pipeline import Searcher
from groove.search.request import SearchRequest
from bench.scale import _queries, WORST_QUERY, RARE_TAG


def load_baseline(checkout: Path):
    spec = importlib.util.spec_from_file_location("baseline_retrievers", checkout / "groove" / "search" / "retrievers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

from bench.common import data_dir

qs = _queries(data_dir(None), 40)
async def main(index: Path, base, out_path: Path | None):
    conn = await db.connect(index, readonly=True)
    rng = np.random.default_rng(7)
    vec = rng.standard_normal(384).astype(np.float32); vec /= np.linalg.norm(vec)
    async def eq(t): return vec
    s = Searcher(SearchSettings(), eq)
    mods = {"baseline": base, "this": new}
    def reading(mod):
        @asynccontextmanager
        async def r():
            yield mod.SqliteSearchReads(conn)
        return r
    res = {k: {} for k in mods}
    jobs = [("warm", q, {}) for q in qs] + [("filtered", q, {"tags_any": [RARE_TAG]}) for q in qs] + [("worst", WORST_QUERY, {})] * 7
    for q in qs[:4]:
        for m in mods: await s.search(reading(mods[m]), SearchRequest(query=q, limit=10))
    for j, (kind, q, extra) in enumerate(jobs):
        for name in (["baseline", "this"] if j % 2 == 0 else ["this", "baseline"]):
            t = time.perf_counter()
            r = await s.search(reading(mods[name]), SearchRequest(query=q, limit=10, explain=True, **extra))
            ms = (time.perf_counter() - t) * 1000
            d = res[name].setdefault(kind, {"total": [], "trigram_ms": [], "bigram_ms": [], "vector_ms": [], "fts": []})
            tm = r["explain"]["timings_ms"]
            d["total"].append(ms)
            for k in ("trigram_ms", "bigram_ms", "vector_ms"): d[k].append(tm.get(k, 0.0))
            d["fts"].append(tm.get("trigram_ms", 0.0) + tm.get("bigram_ms", 0.0))
    out = {}
    for name in mods:
        for kind, d in res[name].items():
            out[f"{name}.{kind}"] = {"p50": round(statistics.median(d["total"]), 1), "p95": round(sorted(d["total"])[max(0, int(0.95 * len(d["total"])) - 1)], 1),
                                     "max": round(max(d["total"]), 1), "fts_p50": round(statistics.median(d["fts"]), 1),
                                     **{k: round(statistics.median(v), 1) for k, v in d.items() if k.endswith("_ms")}}
    for kind in ("warm", "filtered", "worst"):
        a, b = out[f"baseline.{kind}"], out[f"this.{kind}"]
        print(kind, "baseline", a, "\n      this", b, "\n      baseline/this p50", round(a["p50"] / b["p50"], 2), "p95", round(a["p95"] / b["p95"], 2), "fts", round(a["fts_p50"] / max(b["fts_p50"], 0.1), 2), flush=True)
    print("filtered/unfiltered p50: baseline", round(out["baseline.filtered"]["p50"] / out["baseline.warm"]["p50"], 2), "this", round(out["this.filtered"]["p50"] / out["this.warm"]["p50"], 2))
    if out_path:
        out_path.write_text(json.dumps(out, indent=1))
    await conn.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench.fts_ab", description=__doc__.splitlines()[0])
    p.add_argument("index", type=Path, help="the index file (e.g. /tmp/groove-scale/100000/index.sqlite)")
    p.add_argument("--baseline", type=Path, required=True, metavar="DIR", help="the other checkout (e.g. /work/main)")
    p.add_argument("--json", type=Path, default=None, metavar="PATH")
    a = p.parse_args()
    asyncio.run(main(a.index, load_baseline(a.baseline), a.json))
