"""`groove eval`: run judged queries through the same pipeline as `groove search`."""

from __future__ import annotations

from typing import Any, Sequence

import aiosqlite

from groove.evaluate.golden import JudgedQuery
from groove.evaluate.metrics import KS, abstention, aggregate, first_ranks, score_query
from groove.evaluate.report import Confidence, EvalRun
from groove.search.pipeline import Searcher
from groove.search.request import SearchRequest


async def run_eval(
    searcher: Searcher,
    conn: aiosqlite.Connection,
    queries: Sequence[JudgedQuery],
    *,
    retriever: str = "hybrid",
    limit: int = 10,
    request_options: dict[str, Any] | None = None,
    ks: Sequence[int] = KS,
) -> EvalRun:
    """Recall, MRR and nDCG over the answerable queries; the abstention rates (metrics.abstention)
    over both kinds: an unanswerable query (`expected: []`) is scored only by its off_topic flag."""
    scores = []
    per_query = []
    for q in queries:
        req = SearchRequest(query=q.query, limit=limit, retriever=retriever, **(request_options or {}))
        resp = await searcher.search(conn, req)
        hits = resp["results"]
        row: dict[str, Any] = {"id": q.id, "query": q.query, "unanswerable": q.unanswerable}
        if not q.unanswerable:
            ranks = first_ranks(hits, q.expected, lambda h, e: e.matches(h))
            s = score_query(ranks, len(q.expected), (*ks, 10) if 10 not in ks else ks)
            scores.append(s)
            row.update({"ranks": ranks, "recall@10": round(s.recall[10], 4), "rr": round(s.rr, 4),
                        "ndcg@10": round(s.ndcg10, 4)})
        row.update({
            "top": [h["path"] for h in hits[:3]],
            "low_confidence": bool(resp["low_confidence"]),
            "off_topic": bool(resp.get("off_topic")),
            "off_topic_evidence": resp.get("off_topic_evidence"),
        })
        per_query.append(row)
    metrics = aggregate(scores, ks)
    metrics.update(abstention([(r["unanswerable"], r["off_topic"]) for r in per_query]))
    return EvalRun(
        metrics=metrics,
        ks=list(ks),
        confidence=confidence_split([r for r in per_query if not r["unanswerable"]]),
        answerable=len(scores),
        unanswerable=len(per_query) - len(scores),
        queries=per_query,
        count=len(queries),
        retriever=retriever,
    )


def confidence_split(per_query: Sequence[dict[str, Any]]) -> Confidence:
    """Does `low_confidence` mean something: top-1 accuracy of flagged vs unflagged queries."""
    def top1(rows: list[dict[str, Any]]) -> float | None:
        if not rows:
            return None
        return round(sum(1 for r in rows if 1 in r["ranks"]) / len(rows), 4)

    flagged = [r for r in per_query if r["low_confidence"]]
    unflagged = [r for r in per_query if not r["low_confidence"]]
    return Confidence(
        flagged_share=round(len(flagged) / len(per_query), 4) if per_query else 0.0,
        top1_flagged=top1(flagged),
        top1_unflagged=top1(unflagged),
    )
