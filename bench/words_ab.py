"""`python -m bench.words_ab INDEX`: the full-text half of a search, every phrase on the trigram table against the word table's routing.

On one read-only connection to INDEX (e.g. `/tmp/groove-scale/100000/index.sqlite`, built by
`python -m bench scale`, schema 5), for each of the scale bench's 40 queries (half English,
half Japanese), runs the full-text legs two ways, alternating query by query (the order flips
each query), three rounds, the first one a warm-up:

- "trigram": the seeds' routing, as before decision 0014: the compiler's whole expression on
  the trigram table, and the CJK runs on the bigram table;
- "words": this groove's (`pipeline.full_text_plan`): a query made only of words of spaced
  alphabets on the word table, any other query as before.

Each leg is what a search runs: the common terms left out (decision 0010), the ranked
statement, and the leg's evidence. The legs run one after the other, so the figure is their
CPU cost, not a search's wall time (which runs them on two readers beside the query embedding).
Prints p50 / mean per side, all queries and per language, and trigram-over-words ratios;
`--json PATH` writes them. Quality is `groove eval`'s (docs/decisions/0014), not this.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import data_dir, show_ab
from bench.scale import _queries
from groove.corpus.cjk import cjk_query, has_cjk, query_terms
from groove.search import retrievers
from groove.search.compiler import compile_query
from groove.search.pipeline import Leg, excludes_by_id, full_text_plan, leg_evidence
from groove.store import db


def seeds_plan(cq: Any) -> list[Leg]:
    """The legs before decision 0014: every phrase on the trigram table, CJK runs on the bigram table."""
    plan = []
    if cq.match_expr is not None:
        plan.append(("trigram", "fts_chunks", cq.match_expr, list(cq.positives)))
    cjk = cjk_query(cq.vector_text)
    if cjk:
        plan.append(("bigram", "fts_cjk", cjk, query_terms(cq.vector_text)))
    return plan


async def run_legs(reads_: Any, plan: list[Leg]) -> int:
    """Run each leg as a search does; the candidates found, all legs together."""
    found = 0
    for _name, table, expr, terms in plan:
        scored = await reads_.fts_scored(expr, 50, (2.0, 1.0, 1.0), None, table, set() if excludes_by_id(table) else None)
        await leg_evidence(reads_, table, terms, scored)
        found += len(scored)
    return found


async def main(index: Path, out_path: Path | None, data: Path | None = None, rounds: int = 3) -> dict[str, Any]:
    queries = _queries(data_dir(data), 40)
    conn = await db.connect(index, readonly=True)
    reads_ = retrievers.SqliteSearchReads(conn)
    res: dict[str, dict[str, list[float]]] = {side: {"all": [], "en": [], "ja": []} for side in ("trigram", "words")}
    candidates: dict[str, int] = {"trigram": 0, "words": 0}
    try:
        for rnd in range(rounds):
            for i, q in enumerate(queries):
                cq = compile_query(q)
                plans = {"trigram": seeds_plan(cq), "words": full_text_plan(cq, cjk_query(cq.vector_text))}
                for side in (["trigram", "words"] if (i + rnd) % 2 == 0 else ["words", "trigram"]):
                    t = time.perf_counter()
                    found = await run_legs(reads_, plans[side])
                    ms = (time.perf_counter() - t) * 1000
                    if rnd:
                        res[side]["all"].append(ms)
                        res[side]["ja" if has_cjk(q) else "en"].append(ms)
                        candidates[side] += found
    finally:
        await conn.close()
    out: dict[str, Any] = {"index": str(index), "queries": len(queries), "rounds_timed": rounds - 1}
    for side, by in res.items():
        out[side] = {f"{k}_p50_ms": round(statistics.median(v), 1) for k, v in by.items() if v}
        out[side]["all_mean_ms"] = round(statistics.mean(by["all"]), 1)
        out[side]["candidates_per_query"] = round(candidates[side] / max(1, len(by["all"])), 1)
    for k in ("all", "en", "ja"):
        if f"{k}_p50_ms" in out["words"]:
            out[f"trigram_over_words_{k}_p50"] = round(out["trigram"][f"{k}_p50_ms"] / out["words"][f"{k}_p50_ms"], 3)
    out["trigram_over_words_mean"] = round(out["trigram"]["all_mean_ms"] / out["words"]["all_mean_ms"], 3)
    return show_ab(out, out_path)


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench.words_ab", description=__doc__.splitlines()[0])
    p.add_argument("index", type=Path, help="the index file, schema 5 (e.g. /tmp/groove-scale/100000/index.sqlite)")
    p.add_argument("--data", type=Path, default=None, metavar="DIR", help="the folder holding scifact/ and jaquad/")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures as JSON")
    a = p.parse_args()
    asyncio.run(main(a.index, a.json, a.data))
