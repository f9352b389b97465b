"""`groove eval`: run judged queries through the same pipeline as `groove search`.

`evaluate_golden` is the whole command over an open index (the service API's `evaluate`): the judged
queries through the pipeline (`run_eval`), the golden queries a note quotes (evaluate/leaks.py), and the
comparison with the run history (evaluate/history.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from groove.config import Settings
from groove.embed.embedder import Embedder
from groove.errors import UsageError
from groove.evaluate import history
from groove.evaluate.golden import GoldenError, JudgedQuery
from groove.evaluate.golden import load as load_golden
from groove.evaluate.leaks import quoted_queries
from groove.evaluate.metrics import KS, abstention, aggregate, first_ranks, score_query
from groove.evaluate.report import Confidence, EvalReport, EvalRun, HistoryComparison, Leak
from groove.folders import Folders
from groove.logs import get_logger
from groove.search.compiler import QueryError, compile_query
from groove.search.language import Centres
from groove.search.pipeline import Reading, Searcher
from groove.search.request import SearchRequest
from groove.store.protocols import Reads, StoreError

log = get_logger(__name__)


class JudgedIndex(Protocol):
    """What evaluating needs of an open index (`groove.index.Index` is one)."""

    settings: Settings

    @property
    def folders(self) -> Folders: ...

    embedder: Embedder
    path: Path
    reranker_model: str | None

    def reading(self) -> AbstractAsyncContextManager[Reads]: ...

    @property
    def eval_history_location(self) -> str: ...

    async def eval_history(self) -> list[str]: ...

    async def append_eval_history(self, line: str, keep: int) -> None: ...

    def quality_floor(self) -> float | None: ...

    async def language_centres(self) -> Centres | None: ...

    async def evaluate(
        self,
        queries: Sequence[JudgedQuery],
        *,
        retriever: str,
        limit: int,
        request_options: dict[str, Any],
        ks: Sequence[int] = KS,
        vectors: dict[str, np.ndarray] | None = None,
    ) -> EvalRun: ...


def judged_queries(
    source: Path, split: str | None, max_queries: int | None, *, at_least: int = 1, folders: Folders | None = None
) -> list[JudgedQuery]:
    """The golden set's queries (the first `max_queries`); GoldenError when fewer than `at_least`. In an index whose
    one notes folder leads its notes' paths with its name (a shared store), a judged path written inside the
    folder is read as the index holds it."""
    queries = load_golden(source, split)
    if folders is not None and folders.named and len(folders) == 1:
        queries = [q.under(folders.prefix(folders.first)) for q in queries]
    if max_queries is not None:
        queries = queries[:max_queries]
    if len(queries) < at_least:
        if not queries:
            raise GoldenError(
                f"{source} has no judged queries{f' in split {split!r}' if split else ''}; nothing to evaluate"
            )
        raise GoldenError(
            f"{source} has {len(queries)} judged quer{'y' if len(queries) == 1 else 'ies'}; "
            f"{'tune' if at_least > 1 else 'eval'} needs at least {at_least}"
        )
    return queries


def query_vector_texts(queries: Sequence[JudgedQuery]) -> list[str]:
    """The distinct texts the vector leg embeds for these judged queries (a query the compiler
    refuses has none), in order: what eval and tune embed once, up front, in batches."""
    texts = []
    for q in queries:
        try:
            texts.append(compile_query(q.query).vector_text)
        except QueryError:
            continue
    return list(dict.fromkeys(t for t in texts if t.strip()))


async def run_eval(
    searcher: Searcher,
    reading: Reading,
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
        resp = await searcher.search(reading, req)
        hits = resp["results"]
        row: dict[str, Any] = {"id": q.id, "query": q.query, "unanswerable": q.unanswerable}
        if not q.unanswerable:
            ranks = first_ranks(hits, q.expected, lambda h, e: e.matches(h))
            s = score_query(ranks, len(q.expected), (*ks, 10) if 10 not in ks else ks)
            scores.append(s)
            row.update(
                {
                    "ranks": ranks,
                    "recall@10": round(s.recall[10], 4),
                    "rr": round(s.rr, 4),
                    "ndcg@10": round(s.ndcg10, 4),
                }
            )
        row.update(
            {
                "top": [h["path"] for h in hits[:3]],
                "low_confidence": bool(resp["low_confidence"]),
                "off_topic": bool(resp.get("off_topic")),
                "off_topic_evidence": resp.get("off_topic_evidence"),
            }
        )
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


async def evaluate_golden(
    index: JudgedIndex,
    source: Path,
    *,
    retriever: str = "hybrid",
    split: str | None = None,
    limit: int = 10,
    max_queries: int | None = None,
    request_options: dict[str, Any] | None = None,
    ks: Sequence[int] = KS,
    record: bool = True,
) -> EvalReport:
    """`groove eval`: judged queries through the search pipeline, compared with the run history.

    `.history` says how this run compares with the last one of the same configuration
    fingerprint (groove/evaluate/history.py); the run is then recorded in
    `<index>.eval.jsonl` unless `[eval] history = 0` or `record` is False.
    `.leaks` lists golden queries a note quotes verbatim.
    """
    settings = index.settings
    ks = tuple(ks)
    if max(ks) > limit:
        raise UsageError(f"--k {max(ks)} needs at least {max(ks)} results per query; pass --limit {max(ks)} or more")
    queries = judged_queries(source, split, max_queries, folders=index.folders)
    options = dict(request_options or {})
    if index.reranker_model and options.get("rerank") is None:
        options["rerank"] = True  # a model named on the command line applies unconditionally
    run = await index.evaluate(queries, retriever=retriever, limit=limit, request_options=options, ks=ks)
    async with index.reading() as reads:
        leaks = [Leak(**leak) for leak in await quoted_queries(reads, queries)]
    rerank_on = settings.search.rerank_by_default if options.get("rerank") is None else options["rerank"]
    reranker = (index.reranker_model or settings.search.reranker or None) if rerank_on else None
    fp = history.fingerprint(
        model=index.embedder.identity,
        reranker=reranker,
        retriever=retriever,
        limit=limit,
        ks=ks,
        queries=queries,
        search=settings.search,
        request_options=options,
        quality=settings.quality_filter,
    )
    where = index.eval_history_location
    try:
        recorded = history.parse(await index.eval_history())
    except StoreError as exc:
        log.warning("eval_history_not_read", path=where, error=str(exc))
        recorded = []
    cmp = HistoryComparison(
        **history.compare(recorded, fp, run.metrics, settings.eval.regression_threshold), path=where
    )
    if record and settings.eval.history > 0:
        entry = history.record(
            fp, run.metrics, count=run.count, source=str(source), regressed=cmp.status == "regression"
        )
        try:
            await index.append_eval_history(history.line(entry), settings.eval.history)
            cmp.recorded = True
        except OSError as exc:
            log.warning("eval_history_not_written", path=where, error=exc.strerror or str(exc))
        except StoreError as exc:
            log.warning("eval_history_not_written", path=where, error=str(exc))
    for leak in leaks:
        log.warning(
            "golden_query_quoted_in_note",
            query_id=leak.id,
            notes=leak.paths[:5],
            message="a note contains this judged query verbatim, so it may hold the answer key",
        )
    return EvalReport(
        **dict(run), index_path=str(index.path), source=str(source), leaks=leaks, history=cmp, fingerprint=fp
    )
