"""`groove tune`: sweep the fusion knobs on judged queries, cheaply and honestly.

Cheap: each query's legs (trigram, CJK bigram, vector; with their scores and
the full-text evidence) are retrieved once per set of bm25 column weights,
exactly as `Searcher.search` retrieves them, and every fusion setting is then
scored offline by re-fusing those lists with the pipeline's own fusion
functions. The vector leg does not depend on any knob, so each query is
embedded once.

Honest: a setting is chosen by leave-one-query-out cross-validation. For each
query, the best setting on all the *other* queries is picked and scored on
the held-out one; the held-out gain is the mean over queries of (that score -
the current configuration's score). It is a gain only when it beats its
noise: the lower end of a 95% paired bootstrap interval over queries (2,000
resamples, fixed seed) must be above 0. The sign test (queries that got
better vs worse) is reported beside it. Otherwise: keep the current settings.
`tune` never writes the configuration; it prints a block to paste.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from groove.config import FusionSettings
from groove.errors import UsageError
from groove.evaluate import offtopic_offset
from groove.evaluate.golden import Expected, JudgedQuery
from groove.evaluate.metrics import KS, TUNE_METRICS, first_ranks, score_query
from groove.evaluate.report import OffTopicTuning, TuneReport
from groove.evaluate.runner import JudgedIndex, judged_queries, query_vector_texts
from groove.search import fulltext, language, offtopic
from groove.search.compiler import QueryError, compile_query
from groove.search.fusion import weighted_rrf, z_fusion
from groove.search.pipeline import centred_vector_leg, complete_legs, fusion_weights, leg_evidence, pool_size
from groove.store.protocols import Reads

Weights = tuple[float, float, float]  # heading, context, content

BM25_GRID: tuple[Weights, ...] = (
    (2.0, 1.0, 1.0),
    (1.0, 1.0, 1.0),
    (4.0, 1.0, 1.0),
    (2.0, 2.0, 1.0),
    (2.0, 1.0, 2.0),
    (2.0, 0.5, 1.0),
)
EVIDENCE_LOW = (0.0, 0.1, 0.2, 0.25, 0.3, 0.4)
EVIDENCE_HIGH = (0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
RRF_K = (10.0, 30.0, 60.0, 100.0)
RRF_FTS_WEIGHT = (0.25, 0.5, 1.0, 2.0, 4.0)  # the vector leg weighs 1: only the ratio matters
METRICS = TUNE_METRICS
BOOTSTRAP = 2000
SEED = 20261201


@dataclass
class QueryLegs:
    """One query's retrieved legs: name -> [(chunk id, score, higher is better)], and full-text evidence."""

    id: str
    expected: tuple[Expected, ...]
    legs: dict[str, list[tuple[int, float]]]
    evidence: dict[str, float]
    pool: int = 50  # candidates asked of each leg (a leg with fewer returned all its matches)


async def collect_legs(
    reads: Reads,
    queries: Sequence[JudgedQuery],
    vectors: dict[str, np.ndarray],
    weights: Weights,
    limit: int,
    min_quality: float | None = None,
    centres: language.Centres | None = None,
) -> tuple[list[QueryLegs], list[str]]:
    """Every query's legs as `Searcher.search` retrieves them (hybrid, no filters), for one bm25 weighting,
    without the chunks under `min_quality` as search leaves them out (the quality filter, decision 0020).
    With `centres` (a mixed-language index, `[search] language_centres` on) the vector leg is the
    pipeline's `centred_vector_leg`, as a search ranks it; without, the raw cosine's.

    `vectors` maps a compiled query's vector text to its embedding (absent: no vector leg).
    Returns the legs and the ids of queries that do not compile (skipped). Unanswerable queries
    (`expected: []`) are left out: there is no ranking of theirs to judge (the off_topic offset is
    tuned on them, groove/evaluate/offtopic_offset.py)."""
    n = pool_size(limit)
    reads_ = reads.searching(min_quality=min_quality)
    out, skipped = [], []
    for q in queries:
        if q.unanswerable:  # tune weighs rankings; an unanswerable query has none to judge
            continue
        try:
            cq = compile_query(q.query)
        except QueryError:
            skipped.append(q.id)
            continue
        qvec = vectors.get(cq.vector_text) if cq.vector_text.strip() else None
        bigrams = fulltext.bigram_query(cq.vector_text)
        exclude: set[int] = set()
        if cq.negatives and (qvec is not None or bigrams or cq.word_expr):
            exclude = await reads_.matching_ids(cq.negatives)
        legs: dict[str, list[tuple[int, float]]] = {}
        evidence: dict[str, float] = {}
        for name, query, terms in fulltext.plan(cq, bigrams, cq.match_expr is not None):
            kept = await fulltext.without_common_terms(reads_, query)
            scored = await reads_.text_scored(
                kept, n, weights, None, exclude if fulltext.excludes_by_id(name) else None
            )
            legs[name] = [(cid, -bm25) for cid, bm25 in scored]
            ev = await leg_evidence(reads_, query.kind, terms, scored)
            if ev is not None:
                evidence[name] = ev
        if qvec is not None and centres is not None:
            _, legs["vector"], _ = await centred_vector_leg(reads_, centres, qvec, cq.vector_text, n, exclude, None, n)
        elif qvec is not None:
            nearest = await reads_.vector_scored(qvec, n, exclude, None)
            legs["vector"] = [(cid, 1.0 - d * d / 2.0) for cid, d in nearest]
        out.append(QueryLegs(q.id, q.expected, {k: v for k, v in legs.items() if v}, evidence, n))
    return out, skipped


def fuse(settings: FusionSettings, q: QueryLegs) -> list[int]:
    """Chunk ids in fused order: the pipeline's fusion of these legs under `settings`."""
    w = fusion_weights(settings, q.legs, q.evidence)
    if settings.method == "rrf":
        fused = weighted_rrf({k: [c for c, _ in v] for k, v in q.legs.items()}, w, k=settings.rrf_k)
    else:
        fused = z_fusion(q.legs, w, complete_legs(q.legs, q.pool))
    return [cid for cid, _ in fused]


def query_scores(ranked: Sequence[int], q: QueryLegs, hits: dict[int, dict[str, Any]], limit: int) -> dict[str, float]:
    """The metrics of one query's ranked chunk ids, cut at `limit`, judged as `groove eval` judges hits."""
    top = [hits[c] for c in ranked if c in hits][:limit]
    ranks = first_ranks(top, q.expected, lambda h, e: e.matches(h))
    s = score_query(ranks, len(q.expected), (1, 5, 10))
    return {
        "ndcg@10": s.ndcg10,
        "mrr": s.rr,
        "recall@1": s.recall[1],
        "recall@5": s.recall[5],
        "recall@10": s.recall[10],
    }


def candidates(current: FusionSettings) -> list[FusionSettings]:
    """The current settings first, then the grid (every bm25 weighting x evidence and rrf points)."""
    out = [current]
    seen = {_key(current)}
    for h, c, b in BM25_GRID:
        base = {"heading_weight": h, "context_weight": c, "content_weight": b}
        points = [
            {"method": "evidence", "evidence_low": lo, "evidence_high": hi}
            for lo in EVIDENCE_LOW
            for hi in EVIDENCE_HIGH
            if hi > lo
        ]
        points += [
            {"method": "rrf", "rrf_k": k, "rrf_fts_weight": fw, "rrf_vector_weight": 1.0}
            for k in RRF_K
            for fw in RRF_FTS_WEIGHT
        ]
        for p in points:
            cand = current.model_copy(update={**base, **p})
            if _key(cand) not in seen:
                seen.add(_key(cand))
                out.append(cand)
    return out


def _key(s: FusionSettings) -> tuple:
    return tuple(sorted(s.model_dump().items()))


def bm25_of(s: FusionSettings) -> Weights:
    return (s.heading_weight, s.context_weight, s.content_weight)


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact binomial p-value of `wins` against `losses` (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    p = 2 * math.fsum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, p)


def cross_validate(scores: np.ndarray, seed: int = SEED, resamples: int = BOOTSTRAP) -> dict[str, Any]:
    """Leave-one-query-out over a (settings x queries) score matrix; row 0 is the current configuration.

    Returns the setting chosen on all queries, the held-out gain per query against row 0,
    its 95% paired bootstrap interval and the sign test."""
    n_settings, n_queries = scores.shape
    totals = scores.sum(axis=1)
    chosen = np.empty(n_queries, dtype=int)
    for i in range(n_queries):
        chosen[i] = int(np.argmax(totals - scores[:, i]))  # ties: the earliest row, the current one first
    heldout = scores[chosen, np.arange(n_queries)]
    diff = heldout - scores[0]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_queries, size=(resamples, n_queries))
    boot = diff[idx].mean(axis=1)
    low, high = np.quantile(boot, [0.025, 0.975])
    wins, losses = int((diff > 1e-12).sum()), int((diff < -1e-12).sum())
    best = int(np.argmax(totals))
    return {
        "best": best,
        "best_in_sample": float(totals[best] / n_queries),
        "current": float(totals[0] / n_queries),
        "heldout": float(heldout.mean()),
        "gain": float(diff.mean()),
        "interval": [float(low), float(high)],
        "wins": wins,
        "losses": losses,
        "sign_p": sign_test_p(wins, losses),
        "folds_choosing_best": int((chosen == best).sum()),
        "queries": n_queries,
    }


def sweep(
    legs_by_weights: dict[Weights, list[QueryLegs]],
    hits: dict[int, dict[str, Any]],
    grid: Sequence[FusionSettings],
    limit: int,
    metric: str = "ndcg@10",
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Score every setting on every query, cross-validate, and say what to do."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}")
    rows = []
    for i, s in enumerate(grid):
        qs = legs_by_weights[bm25_of(s)]
        rows.append([query_scores(fuse(s, q), q, hits, limit)[metric] for q in qs])
        if progress:
            progress(i + 1, len(grid))
    scores = np.asarray(rows, dtype=float)
    if scores.shape[1] < 2:
        raise ValueError("tune needs at least 2 judged queries to hold one out")
    cv = cross_validate(scores)
    best = grid[cv["best"]]
    significant = cv["best"] != 0 and cv["interval"][0] > 0
    return {
        "metric": metric,
        "settings_tried": len(grid),
        "cv": cv,
        "current": grid[0].model_dump(),
        "best": best.model_dump(),
        "recommend": significant,
        "block": fusion_block(best) if significant else None,
    }


def fusion_block(s: FusionSettings) -> str:
    """A paste-ready `[search.fusion]` table."""
    lines = ["[search.fusion]"]
    for key, value in s.model_dump().items():
        lines.append(f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {float(value)!r}")
    return "\n".join(lines) + "\n"


async def tune_golden(
    index: JudgedIndex,
    source: Path,
    *,
    split: str | None = None,
    limit: int = 10,
    max_queries: int | None = None,
    metric: str = "ndcg@10",
    progress: Callable[[str, int, int], None] | None = None,
) -> TuneReport:
    """`groove tune`: legs retrieved once per bm25 weighting, every fusion setting re-fused offline,
    leave-one-query-out cross-validation. Writes nothing."""
    settings = index.settings
    queries = judged_queries(source, split, max_queries, at_least=2, folders=index.folders)
    grid = candidates(settings.search.fusion)
    texts = query_vector_texts(queries)
    if progress:
        progress("embedding queries", 0, len(texts))
    vectors = dict(zip(texts, await anyio.to_thread.run_sync(index.embedder.embed_queries, texts), strict=True))
    if progress:
        progress("embedding queries", len(texts), len(texts))
    legs: dict[Weights, list[QueryLegs]] = {}
    skipped: list[str] = []
    centres = await index.language_centres()  # the vector leg as a search ranks it (a mixed-language index)
    async with index.reading() as reads:
        weightings = list(dict.fromkeys(bm25_of(s) for s in grid))
        if progress:
            progress("retrieving legs", 0, len(weightings))
        for i, w in enumerate(weightings):
            legs[w], skipped = await collect_legs(reads, queries, vectors, w, limit, index.quality_floor(), centres)
            if progress:
                progress("retrieving legs", i + 1, len(weightings))
        hits = await reads.chunk_locations()
    off_topic = None
    if any(q.unanswerable for q in queries):
        if progress:
            progress("off_topic", 0, len(queries))
        off_topic = await _off_topic_tuning(index, queries, vectors, limit, settings.search.off_topic.threshold_offset)
        if progress:
            progress("off_topic", len(queries), len(queries))
    index_path = str(index.path)
    if progress:
        progress("scoring settings", 0, len(grid))
    try:
        result = await anyio.to_thread.run_sync(
            lambda: sweep(
                legs,
                hits,
                grid,
                limit,
                metric,
                progress=(lambda d, t: progress("scoring settings", d, t)) if progress else None,
            )
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    refine_on = [
        name
        for name, on in (
            ("mmr", settings.search.mmr.enabled),
            ("rerank", settings.search.rerank_by_default),
            ("parent_retriever", settings.search.parent_retriever.enabled),
        )
        if on
    ]
    answerable = sum(1 for q in queries if not q.unanswerable)  # the unanswerable ones place the off_topic line
    return TuneReport(
        **result,
        source=str(source),
        index_path=index_path,
        count=answerable - len(skipped),
        skipped=skipped,
        limit=limit,
        refine_stages_ignored=refine_on,
        off_topic=off_topic,
    )


async def _off_topic_tuning(
    index: JudgedIndex, queries: Sequence[JudgedQuery], vectors: dict[str, np.ndarray], limit: int, current: float
) -> OffTopicTuning | None:
    """Every judged query through the default hybrid search once (with the query vectors tune already
    embedded); the offset its margins support."""
    run = await index.evaluate(
        queries,
        retriever="hybrid",
        limit=limit,
        request_options={},
        ks=tuple(k for k in KS if k <= limit) or (limit,),
        vectors=vectors,
    )
    # a search that found nothing is off topic whatever the line: no margin, its flag stays
    rows = [
        (r.unanswerable, offtopic.margin(r.off_topic_evidence) if r.off_topic_evidence and r.top else None, r.off_topic)
        for r in run.queries
    ]
    p = offtopic_offset.propose(rows, current)
    if p is None:
        return None

    def named(pair: tuple[float | None, float | None]) -> dict[str, float | None]:
        return {
            "answerable_flagged": None if pair[0] is None else round(pair[0], 4),
            "unanswerable_flagged": None if pair[1] is None else round(pair[1], 4),
        }

    return OffTopicTuning(
        answerable=sum(1 for r in rows if not r[0]),
        unanswerable=sum(1 for r in rows if r[0]),
        current_offset=current,
        offset=p.offset,
        now=named(p.now),
        held_out=named(p.held_out),
        recommend=p.recommend,
        reason=p.reason,
        block=offtopic_offset.block(p.offset) if p.recommend else None,
    )
