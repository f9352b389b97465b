"""the full-text half of a search: every phrase on the trigram table against the word table's routing (decision 0014)

`python -m bench ab words INDEX`: on one read-only connection to INDEX (e.g.
`/tmp/groove-scale/100000/index.sqlite`, built by `python -m bench scale`, schema 5), for each of
the scale bench's 40 queries (half English, half Japanese), runs the full-text legs two ways,
alternating query by query (the order flips each query), three rounds, the first one a warm-up:

- "trigram": the seeds' routing, as before decision 0014: the compiler's whole expression on
  the trigram table, and the CJK runs on the bigram table;
- "words": this groove's (`fulltext.plan`): a query made only of words of spaced
  alphabets on the word table, any other query as before.

Each leg is what a search runs: the common terms left out (decision 0010), the ranked
statement, and the leg's evidence. The legs run one after the other, so the figure is their
CPU cost, not a search's wall time (which runs them on two readers beside the query embedding).
Prints p50 / mean per side, all queries and per language, and trigram-over-words ratios.
Quality is `groove eval`'s (docs/decisions/0014), not this. Decision 0014 was measured with it
(as `python -m bench.words_ab`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import anyio

from bench.common import alternate, data_dir, show_ab
from bench.scale import scale_queries


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", type=Path, help="the index file, schema 5 (e.g. /tmp/groove-scale/100000/index.sqlite)")
    p.add_argument("--rounds", type=int, default=3, help="rounds over the queries, the first a warm-up (default 3)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return show_ab(anyio.run(measure, args.index, args.data, args.rounds))


def seeds_plan(cq: Any) -> list[Any]:
    """The legs before decision 0014: every phrase on the trigram table, CJK runs on the bigram table."""
    from groove.corpus.cjk import query_terms
    from groove.search import fulltext
    from groove.store.protocols import TextQuery

    plan = []
    if cq.match_expr is not None:
        plan.append(("trigram", TextQuery("phrases", cq.positives, excluded=cq.negatives), list(cq.positives)))
    bigrams = fulltext.bigram_query(cq.vector_text)
    if bigrams is not None:
        plan.append(("bigram", bigrams, query_terms(cq.vector_text)))
    return plan


async def run_legs(reads_: Any, plan: list[Any]) -> int:
    """Run each leg as a search does; the candidates found, all legs together."""
    from groove.search import fulltext
    from groove.search.pipeline import leg_evidence

    found = 0
    for name, query, terms in plan:
        kept = await fulltext.without_common_terms(reads_, query)
        scored = await reads_.text_scored(
            kept, 50, (2.0, 1.0, 1.0), None, set() if fulltext.excludes_by_id(name) else None
        )
        await leg_evidence(reads_, query.kind, terms, scored)
        found += len(scored)
    return found


async def measure(index: Path, data: Path | None = None, rounds: int = 3) -> dict[str, Any]:
    from groove.corpus.cjk import has_cjk
    from groove.search import fulltext
    from groove.search.compiler import compile_query
    from groove.store.sqlite import connection
    from groove.store.sqlite.search import SqliteSearchReads

    queries = scale_queries(data_dir(data), 40)
    conn = await connection.connect(index, readonly=True)
    reads_ = SqliteSearchReads(conn)
    res: dict[str, dict[str, list[float]]] = {side: {"all": [], "en": [], "ja": []} for side in ("trigram", "words")}
    candidates: dict[str, int] = {"trigram": 0, "words": 0}
    try:
        for rnd in range(rounds):
            for i, q in enumerate(queries):
                cq = compile_query(q)
                plans = {"trigram": seeds_plan(cq), "words": fulltext.plan(cq, fulltext.bigram_query(cq.vector_text))}
                for side in alternate(["trigram", "words"], i + rnd):
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
    return out
