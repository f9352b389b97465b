"""The query-time pipeline, in the seeds' fixed order:

    compile -> vec KNN + full-text bm25 legs (filtered) -> fusion -> [rerank] -> [MMR] -> [parent] -> match_spans

Fusion is `[search.fusion] method`: "evidence" by default (standardised scores, each full-text leg weighed by
the share of the query its top hits contain: decision 0007), or the seeds' plain "rrf". The store answers the
legs (groove.store.protocols: a full-text leg is a TextQuery, the common terms left out by search/fulltext.py
first); everything from fusion on is the same code for every store.

Each refine stage is pure and returns its input unchanged when off, so a
configuration with every stage off returns exactly the fused list.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import numpy as np

from groove.config import FusionSettings, QualityFilterSettings, SearchSettings
from groove.corpus.cjk import cjk_query
from groove.logs import get_logger
from groove.search import fulltext, language, offtopic
from groove.search.compiler import CompiledQuery, compile_query
from groove.search.evidence import coverage, term_weights
from groove.search.filters import allowed_documents, excluded_sections, why_nothing
from groove.search.fulltext import FULL_TEXT_LEGS
from groove.search.fusion import evidence_weight, low_confidence, weighted_rrf, z_fusion
from groove.search.hits import Hit
from groove.search.mmr import apply_mmr
from groove.search.parent import ChunkInfo, apply_parent
from groove.search.request import MAX_LIMIT, MAX_QUERY_BYTES, Retriever, SearchRequest
from groove.search.spans import apply_match_spans
from groove.store.memory import VectorMatrix
from groove.store.protocols import Reads, SearchReads, TextKind, TextQuery

log = get_logger(__name__)

__all__ = ["MAX_LIMIT", "MAX_QUERY_BYTES", "Reranker", "Retriever", "SearchRequest", "Searcher", "pool_size"]


class Reranker(Protocol):
    identity: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


CONFIDENCE_DEPTH = 10  # low_confidence looks this far down the fused list for the next note
EVIDENCE_DEPTH = 3  # a full-text leg's evidence is the best coverage among its top 3 hits


def fusion_weights(settings: FusionSettings, legs: dict[str, Any], evidence: dict[str, float]) -> dict[str, float]:
    """Per-leg weights: the vector leg 1; each full-text leg by how much of the query its best hits contain.

    With method "rrf" the vector leg weighs `rrf_vector_weight` and each full-text leg
    `rrf_fts_weight` (both 1 by default: the seeds' plain RRF). When no leg keeps a
    weight (no vectors yet and weak keyword evidence), the full-text legs weigh 1:
    a weak match is still better than none.
    """
    if settings.method == "rrf":
        return {name: settings.rrf_vector_weight if name == "vector" else settings.rrf_fts_weight for name in legs}
    out = {}
    for name in legs:
        if name == "vector":
            out[name] = 1.0
        else:
            out[name] = round(
                evidence_weight(evidence.get(name, 0.0), settings.evidence_low, settings.evidence_high), 4
            )
    if legs and not any(out.values()):
        out = {name: 1.0 for name in legs}
    return out


def is_low_confidence(settings: SearchSettings, hits: Sequence[Hit], ratio: float | None = None) -> bool:
    """Whether the top result is a guess.

    Evidence fusion: the top fused score leads the best hit from another note
    by less than `confidence_margin` of itself, so another note could as well be
    the answer (measured on both languages: top-1 accuracy of unflagged searches
    is well above that of flagged ones; docs/decisions/0007). `hits` are the
    fused list's head, best first, with their fused scores.
    Plain RRF keeps the seeds' rule: top / mean(top 10) < min_confidence_ratio; so does a search that gives its
    own `ratio` (a request's min_confidence_ratio), whatever the fusion (its fused scores are never negative).
    """
    if ratio is not None or settings.fusion.method == "rrf":
        return low_confidence([h.score for h in hits[:10]], ratio or settings.min_confidence_ratio)
    if not hits or hits[0].score <= 0:
        return False
    other = next((h.score for h in hits[1:] if h.doc_id != hits[0].doc_id), None)
    if other is None:
        return False
    return (hits[0].score - other) / hits[0].score < settings.confidence_margin


# Something to read with, taken for a part of a search and given back: a store's `reading` (each view a
# `groove.store.protocols.Reads` on one connection).
Reading = Callable[[], AbstractAsyncContextManager[Reads]]
Spare = Callable[[], AbstractAsyncContextManager[Reads | None]]


def _as_reading(
    source: Reading, matrix: VectorMatrix | None = None, min_quality: float | None = None
) -> Callable[[], AbstractAsyncContextManager[SearchReads]]:
    """A store's views as one search reads them: with the process's in-memory vectors when it keeps them, and
    without the chunks under `min_quality` (the quality filter, decision 0020)."""

    @asynccontextmanager
    async def taken() -> AsyncIterator[SearchReads]:
        async with source() as got:
            yield got.searching(matrix, min_quality)

    return taken


async def leg_evidence(
    reads_: SearchReads, kind: TextKind, terms: list[str], scored: Sequence[tuple[int, float]]
) -> float | None:
    """How much of the query a leg's best hits contain (decision 0007); None without hits.
    A term is found as a case-folded substring, in every leg: the word leg too, whose stems
    match more than the text holds literally (decision 0014 measured both)."""
    if not scored:
        return None
    df, n_chunks = await reads_.doc_freq(kind, terms)
    top = await reads_.fetch_texts([cid for cid, _ in scored[:EVIDENCE_DEPTH]])
    return round(coverage(terms, term_weights(terms, df, n_chunks), list(top.values())), 4)


async def centred_vector_leg(
    store: SearchReads,
    centres: language.Centres,
    qvec: np.ndarray,
    text: str,
    n: int,
    exclude: Any,
    allowed: Any,
    limit: int | None = None,
) -> tuple[list[tuple[int, float]], list[tuple[int, float]], dict[int, np.ndarray]]:
    """The vector leg of a mixed-language index (search/language.py, decision 0019): the raw query's
    `n` nearest and the centred query's WIDEN x `n`, weighed by `Centres.scores`. Returns the raw KNN
    (chunk id, distance), the weighed `limit` best (all candidates when None) and the fetched vectors.
    A search and the off_topic calibration both rank this way, so the calibration's centred scale is
    the one a search reads."""
    # Both KNNs in one pass over the in-memory vectors, and the candidates' vectors from that copy.
    (nearest, across), vectors = await store.vector_legs(
        [(qvec, n), (centres.query(qvec, text), n * language.WIDEN)], exclude, allowed
    )
    candidates = [cid for cid, _ in nearest] + [cid for cid, _ in across]
    return nearest, language.rerank(centres, qvec, text, candidates, vectors, limit or len(candidates)), vectors


def _applied(req: SearchRequest, settings: SearchSettings) -> dict[str, Any] | None:
    """The filter a search applied (its answer's filter_applied): the notes' filter and the headings left out."""
    applied = req.compiled_filters.to_dict()
    headings = req.exclude_headings if req.exclude_headings is not None else settings.exclude_headings
    if headings:
        applied["exclude_headings"] = list(headings)
    return applied or None


def complete_legs(legs: Mapping[str, Sequence[tuple[int, float]]], n: int) -> dict[str, float]:
    """The full-text legs that returned fewer than the `n` asked for, so every chunk they match,
    each with the score of a chunk it does not match (0: no bm25), for z-fusion."""
    return {name: 0.0 for name, scored in legs.items() if name in FULL_TEXT_LEGS and len(scored) < n}


def pool_size(limit: int) -> int:
    """Per-retriever candidates: limit x 5, at least 50."""
    return max(limit * 5, 50)


@dataclass
class Run:
    """One search on its way through the pipeline: what it was asked, and what each stage adds.

    The stages read and fill this one object instead of passing a dozen values (and the same dicts)
    from one helper to the next; a `Run` lives for one search only."""

    req: SearchRequest
    cq: CompiledQuery
    n: int  # candidates per leg (pool_size)
    weights: tuple[float, float, float]  # bm25 column weights: heading, context, content
    bigrams: TextQuery | None  # the bigram leg's query (None: no CJK text, or vector only)
    started: float  # perf_counter at the start, for explain's total
    allowed_docs: Sequence[int] | None = None  # a filter's documents (None: no filter)
    filter_miss: dict[str, Any] | None = None  # a filter that left no document: why (filters.why_nothing)
    exclude: set[int] = field(default_factory=set)  # chunks an exclusion (-word) or exclude_headings removes
    left_out: set[int] = field(default_factory=set)  # the chunks under exclude_headings (every leg drops them)
    legs: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # leg -> (chunk id, higher is better)
    evidence: dict[str, float] = field(default_factory=dict)  # full-text leg -> coverage of the query
    timings: dict[str, float] = field(default_factory=dict)
    sent: dict[str, str] | None = None  # leg -> what the store ran (with explain)
    kept: dict[str, TextQuery] = field(default_factory=dict)  # leg -> its query without the common terms
    degraded: bool = False  # the query could not be embedded
    calibration: offtopic.Calibration | None = None  # the index's similarity scale (off_topic)
    centres: language.Centres | None = None  # the index's language means (a mixed-language index), else None
    raw_vector: list[tuple[int, float]] | None = None  # the vector leg by raw cosine, when centres reorder it
    across: bool = False  # the vector leg's best passage is in the other language than the query's
    min_quality: float | None = None  # the legs leave out the chunks scoring under it (None: none)
    # Explain with a quality floor: the legs run once over every chunk, deep enough that the floor is applied
    # here (`Searcher._kept_and_every`), and these hold each leg as it is without the floor, so that what the
    # floor hid is known without a second search (decision 0020).
    every_legs: dict[str, list[tuple[int, float]]] | None = None
    every_evidence: dict[str, float] = field(default_factory=dict)
    every_raw_vector: list[tuple[int, float]] | None = None
    every_across: bool = False
    hidden: int = 0  # chunks under the floor (with every_legs)


class Searcher:
    def __init__(
        self,
        settings: SearchSettings,
        embed_query: Callable[[str], Awaitable[np.ndarray]],
        reranker: Callable[[], Reranker | None] | None = None,
        vectors: VectorMatrix | None = None,
        quality: QualityFilterSettings | None = None,
    ):
        self.settings = settings
        self.quality = quality or QualityFilterSettings()  # `[quality_filter]`: on, 0.3, unless told
        self.embed_query = embed_query
        self.reranker = reranker
        self.vectors = vectors  # a long-running process's in-memory vectors (store/memory.py), or None
        self.calibration: offtopic.Calibration | None = None  # off_topic's scale, for the index as last seen
        self._calibrating = anyio.Lock()
        self._uncalibrated: tuple[str, int] | None = None
        self.centres: language.Centres | None = None  # the language means, for the index as last seen
        self._centres_for: tuple[str, int] | None = None  # (model, size) they were last measured for
        self._measuring_centres = anyio.Lock()

    async def calibration_for(
        self, source: Reading, state: tuple[str, int, str | None] | None = None
    ) -> offtopic.Calibration | None:
        """The index's off_topic calibration (search/offtopic.py): this process's, while it serves
        the index's vectors; else the one stored with the index (`groove index` writes it); else
        measured now, once, with CALIBRATION_QUERIES synthetic queries (no reader is held while
        they are embedded). None when the index has too few vectors or the model fails.

        Measured as searches see the index by default: without the chunks under the quality floor
        (decision 0020), both the passages its synthetic queries come from and the ones they find;
        a scale measured over every chunk put a searched top cosine lower than it is, and flagged
        more answerable queries (SciFact test: 12.5% with it, 8.7% with the filter off)."""
        floor = self.quality.floor()
        reading = _as_reading(source, self.vectors, floor)
        if state is None:
            async with reading() as store:
                state = await store.calibration_state()
        model, size, stored = state
        # A mixed-language index is calibrated on the scale its vector leg scores with as well (decision 0017).
        centres = await self.centres_for(source, state) if self.settings.language_centres else None
        centred = centres is not None
        cal = self.calibration
        if cal is not None and cal.serves(model, size, floor, centred):
            return cal
        if size == 0 or self._uncalibrated == (model, size):
            return None
        if cal is not None and self._calibrating.locked():
            return cal  # another search is measuring the moved index: this one keeps the last scale, not waiting
        async with self._calibrating:
            cal = self.calibration
            if cal is not None and cal.serves(model, size, floor, centred):
                return cal
            try:
                cal = offtopic.Calibration.from_dict(json.loads(stored)) if stored else None
            except (ValueError, KeyError, TypeError):
                cal = None
            if cal is None or not cal.serves(model, size, floor, centred):
                cal = await self._measure_calibration(reading, model, size, floor, centres)
            if cal is None:
                self._uncalibrated = (model, size)  # measured, and too few passages: not again until it moves
            else:
                self.calibration = cal
            return cal

    async def centres_for(
        self, source: Reading, state: tuple[str, int, str | None] | None = None
    ) -> language.Centres | None:
        """The index's language centres (search/language.py): measured on a sample of its passages once
        per process and again when the collection moves; None for a one-language index."""
        reading = _as_reading(source, self.vectors)
        if state is None:
            async with reading() as store:
                state = await store.calibration_state()
        model, size, _ = state
        if size == 0:
            return None
        if self._centres_for is not None and (
            self.centres.serves(model, size) if self.centres is not None else self._centres_for == (model, size)
        ):
            return self.centres
        async with self._measuring_centres:
            if self._centres_for != (model, size):
                t = time.perf_counter()
                async with reading() as store:
                    passages = await store.calibration_passages(language.SAMPLE)
                    vectors = await store.fetch_vectors([cid for cid, _, _ in passages])
                kept = [(text, vectors[cid]) for cid, _, text in passages if cid in vectors]
                self.centres = language.measure(
                    [t_ for t_, _ in kept],
                    np.stack([v for _, v in kept]) if kept else np.zeros((0, 1), dtype=np.float32),
                    model=model,
                    size=size,
                )
                self._centres_for = (model, size)
                log.debug(
                    "language_centres",
                    ms=_ms(t),
                    sampled=len(kept),
                    **(self.centres.describe() if self.centres else {"centres": None}),
                )
        return self.centres

    async def _measure_calibration(
        self,
        reading: Callable[[], AbstractAsyncContextManager[SearchReads]],
        model: str,
        size: int,
        floor: float | None = None,
        centres: language.Centres | None = None,
    ) -> offtopic.Calibration | None:
        """The synthetic queries' best cosine with and without their note; with `centres`, also their
        best score as the vector leg of a mixed-language index ranks (the same two KNNs and weighing)."""
        t = time.perf_counter()
        async with reading() as store:
            passages = await store.calibration_passages(offtopic.CALIBRATION_QUERIES)
        queries, vectors = [], []
        try:
            for cid, _, text in passages:
                queries.append(offtopic.synthetic_query(text, cid))
                vectors.append(await self.embed_query(queries[-1]))
        except Exception as exc:  # noqa: BLE001 - no calibration: off_topic falls back to the evidence
            log.warning("off_topic_calibration_failed", error=repr(exc))
            return None
        answered: list[float] = []
        unanswered: list[float] = []
        answered_c: list[float] = []
        unanswered_c: list[float] = []
        depth = offtopic.CALIBRATION_DEPTH
        async with reading() as store:
            for (_, doc, _), text, vec in zip(passages, queries, vectors, strict=True):
                if centres is not None:
                    near, weighed, _ = await centred_vector_leg(store, centres, vec, text, depth, None, None)
                else:
                    near, weighed = await store.vector_scored(vec, depth, None, None), []
                if not near:
                    continue
                scored = [(c, 1.0 - d * d / 2.0) for c, d in near]
                docs = await store.chunk_docs(list({c for c, _ in scored + weighed}))
                for ranked, a, u in ((scored, answered, unanswered), (weighed, answered_c, unanswered_c)):
                    if ranked:
                        a.append(ranked[0][1])
                        other = next((s for c, s in ranked if docs.get(c) != doc), None)
                        if other is not None:
                            u.append(other)
        cal = offtopic.calibrate(
            answered,
            unanswered,
            model=model,
            vectors=size,
            min_quality=floor,
            answered_centred=answered_c,
            unanswered_centred=unanswered_c,
        )
        log.debug(
            "off_topic_calibrated",
            measured=len(answered),
            ms=_ms(t),
            **(cal.to_dict() if cal else {"calibration": None}),
        )
        return cal

    async def search(
        self,
        source: Reading,
        req: SearchRequest,
        spare: Spare | None = None,
    ) -> dict[str, Any]:
        """One search. `source` is a store's `reading`: with a pool of readers, the full-text legs and the
        query embedding run at the same time, and no reader is held while the embedding is awaited
        (decision 0009). `spare` (a second reader if one is free now, else None) lets the trigram and the
        bigram leg run at once, each on its own connection."""
        floor = self.quality_floor(req)
        # Both halves without the chunks under the floor; with explain, over every chunk, the floor applied here.
        derive = req.explain and floor is not None
        reading = _as_reading(source, self.vectors, None if derive else floor)
        cq = compile_query(req.query)
        s = self.settings
        run = Run(
            req=req,
            cq=cq,
            n=pool_size(req.limit),
            weights=(s.fusion.heading_weight, s.fusion.context_weight, s.fusion.content_weight),
            bigrams=fulltext.bigram_query(cq.vector_text) if req.retriever in ("hybrid", "fts") else None,
            started=time.perf_counter(),
            sent={} if req.explain else None,
            min_quality=floor,
            every_legs={} if derive else None,
        )
        use_vector = req.retriever in ("hybrid", "vector") and bool(cq.vector_text.strip())
        use_fts = req.retriever in ("hybrid", "fts") and cq.match_expr is not None
        embedded: dict[str, Any] = {}

        async def embed() -> None:
            # If the model fails, the full-text legs answer alone (vectors_degraded).
            t = time.perf_counter()
            try:
                embedded["vector"] = await self.embed_query(cq.vector_text)
            except Exception as exc:  # noqa: BLE001 - the model failing must not take search down
                log.warning("query_embedding_failed", error=repr(exc))
                embedded["degraded"] = True
            run.timings["embed_ms"] = _ms(t)

        # The query embedding and the full-text half at once; the reader is given back
        # before the embedding is awaited (the task group's exit).
        async with anyio.create_task_group() as tg:
            if use_vector:
                tg.start_soon(embed)
            async with reading() as store:
                if floor is not None and derive:
                    run.hidden = await store.low_quality_count(floor)
                run.allowed_docs = await allowed_documents(store, req.compiled_filters)
                if run.allowed_docs == []:  # nothing to search: say why, not that the notes are silent
                    run.filter_miss = await why_nothing(store, req.compiled_filters)
                if cq.negatives and (use_vector or run.bigrams or (use_fts and cq.word_expr)):
                    # The trigram leg leaves out the excluded phrases itself; the other legs drop these ids.
                    run.exclude = await store.matching_ids(cq.negatives)
                headings = req.exclude_headings if req.exclude_headings is not None else s.exclude_headings
                run.left_out = await excluded_sections(store, headings)
                run.exclude |= run.left_out  # every leg drops these before it ranks (the trigram leg too, below)
                await self._full_text_legs(store, run, use_fts, spare)
        qvec = embedded.get("vector")
        run.degraded = bool(embedded.get("degraded"))
        if qvec is not None:
            async with reading() as store:  # one O(1) statement: the vector set's model and size
                state = await store.calibration_state()
            run.calibration = await self.calibration_for(source, state)
            run.centres = await self.centres_for(source, state) if self.settings.language_centres else None

        async with reading() as store:
            if run.degraded and req.retriever == "vector":
                run.bigrams = fulltext.bigram_query(cq.vector_text)
                if cq.negatives and (run.bigrams or cq.word_expr) and run.exclude <= run.left_out:
                    run.exclude = await store.matching_ids(cq.negatives) | run.left_out
                await self._full_text_legs(store, run, cq.match_expr is not None, spare)
            if qvec is not None:
                t = time.perf_counter()
                if run.every_legs is not None:
                    await self._vector_leg_and_every(store, run, qvec)
                elif run.centres is None:
                    nearest = await store.vector_scored(qvec, run.n, run.exclude, run.allowed_docs)
                    run.legs["vector"] = [(cid, 1.0 - d * d / 2.0) for cid, d in nearest]
                else:  # a mixed-language index: the language taken out of the similarity (search/language.py)
                    nearest, run.legs["vector"], vectors = await centred_vector_leg(
                        store, run.centres, qvec, cq.vector_text, run.n, run.exclude, run.allowed_docs, run.n
                    )
                    run.raw_vector = [(cid, 1.0 - d * d / 2.0) for cid, d in nearest]
                    run.across = language.across(run.centres, cq.vector_text, run.legs["vector"], vectors)
                run.timings["vector_ms"] = _ms(t)
            response = await self._fuse_and_refine(store, run)
            unfiltered = None
            if run.every_legs is not None:  # the same legs without the floor: what it hid (explain)
                unfiltered = await self._fuse_and_refine(
                    store,
                    dataclasses.replace(
                        run,
                        req=req.model_copy(update={"include_low_quality": True, "min_quality": None, "explain": False}),
                        legs=run.every_legs,
                        evidence=run.every_evidence,
                        raw_vector=run.every_raw_vector,
                        across=run.every_across,
                        min_quality=None,
                        sent=None,
                        timings={},
                        every_legs=None,
                    ),
                )
        if req.explain:
            response["explain"]["quality_filter"] = await self._explain_quality(source, run, response, unfiltered)
        return response

    async def _kept_and_every(
        self,
        store: SearchReads,
        run: Run,
        limits: Sequence[int],
        fetch: Callable[[list[int]], Awaitable[tuple[list[list[tuple[int, float]]], Any]]],
    ) -> tuple[list[list[tuple[int, float]]], list[list[tuple[int, float]]], Any]:
        """Legs asked over every chunk (`fetch(depths)`: one ranked list per leg, and what else it returns), deep
        enough that the first `limit` chunks scoring at least the floor are the leg the floor leaves (the floor
        only removes rows of a ranking): a few more first, then as many more as the floor hides. Returns the legs
        without the hidden chunks, the legs over every chunk (each cut to its limit) and fetch's other value."""
        floor = run.min_quality or 0.0
        got: list[list[tuple[int, float]]] = []
        kept: list[list[tuple[int, float]]] = []
        other: Any = None
        for extra in dict.fromkeys((min(run.hidden, max(max(limits), 16)), run.hidden)):
            depths = [limit + extra for limit in limits]
            got, other = await fetch(depths)
            quality = await store.chunk_quality(list({cid for leg in got for cid, _ in leg}))
            kept = [[(cid, s) for cid, s in leg if quality.get(cid, 1.0) >= floor] for leg in got]
            if all(len(k) >= n or len(g) < d for k, g, n, d in zip(kept, got, limits, depths, strict=True)):
                break
        return (
            [k[:n] for k, n in zip(kept, limits, strict=True)],
            [g[:n] for g, n in zip(got, limits, strict=True)],
            other,
        )

    async def _vector_leg_and_every(self, store: SearchReads, run: Run, qvec: np.ndarray) -> None:
        """The vector leg with the floor applied here, and without it (`run.every_legs`): explain's one pass."""
        assert run.every_legs is not None  # explain with a floor
        text, centres = run.cq.vector_text, run.centres
        if centres is None:

            async def raw(depths: list[int]) -> tuple[list[list[tuple[int, float]]], None]:
                return [await store.vector_scored(qvec, depths[0], run.exclude, run.allowed_docs)], None

            (nearest,), (every,), _ = await self._kept_and_every(store, run, [run.n], raw)
            run.legs["vector"] = [(cid, 1.0 - d * d / 2.0) for cid, d in nearest]
            run.every_legs["vector"] = [(cid, 1.0 - d * d / 2.0) for cid, d in every]
            return
        centred = centres.query(qvec, text)

        async def both(depths: list[int]) -> tuple[list[list[tuple[int, float]]], dict[int, np.ndarray]]:
            return await store.vector_legs(
                list(zip((qvec, centred), depths, strict=True)), run.exclude, run.allowed_docs
            )

        limits = [run.n, run.n * language.WIDEN]
        (near, across), (near_all, across_all), vectors = await self._kept_and_every(store, run, limits, both)
        for legs, (n_, a_) in ((run.legs, (near, across)), (run.every_legs, (near_all, across_all))):
            candidates = [cid for cid, _ in n_] + [cid for cid, _ in a_]
            legs["vector"] = language.rerank(centres, qvec, text, candidates, vectors, run.n)
        run.raw_vector = [(cid, 1.0 - d * d / 2.0) for cid, d in near]
        run.every_raw_vector = [(cid, 1.0 - d * d / 2.0) for cid, d in near_all]
        run.across = language.across(centres, text, run.legs["vector"], vectors)
        run.every_across = language.across(centres, text, run.every_legs["vector"], vectors)

    def quality_floor(self, req: SearchRequest) -> float | None:
        """The score under which this search hides chunks (decision 0020): none with include_low_quality,
        else the request's min_quality, else `[quality_filter] threshold` while the filter is on. None (or 0):
        nothing is hidden."""
        if req.include_low_quality:
            return None
        return (req.min_quality or None) if req.min_quality is not None else self.quality.floor()

    async def _explain_quality(
        self, source: Reading, run: Run, response: dict[str, Any], unfiltered: dict[str, Any] | None
    ) -> dict[str, Any]:
        """What the quality filter did to this answer, for explain: the floor and who set it, how many chunks of
        the index it hides, each shown result's score, and the results it hid here (`unfiltered`: the answer the
        same legs give without the floor, from this search's one pass). With no floor: the shown results that the
        configured threshold would hide."""
        req, floor = run.req, run.min_quality
        set_by = (
            "include_low_quality"
            if req.include_low_quality
            else "min_quality"
            if req.min_quality is not None
            else "settings"
            if self.quality.enabled
            else "off"
        )
        shown = [r["chunk_id"] for r in response["results"]]
        hidden: list[dict[str, Any]] = []
        if floor is not None and unfiltered is not None:
            hidden = [
                {
                    "rank": i,
                    "chunk_id": r["chunk_id"],
                    "path": r["path"],
                    "heading": r["heading"],
                    "start_line": r["start_line"],
                    "end_line": r["end_line"],
                }
                for i, r in enumerate(unfiltered["results"], 1)
            ]
        bar = floor if floor is not None else self.quality.threshold
        async with _as_reading(source, self.vectors)() as store:
            scores = await store.chunk_quality(shown + [h["chunk_id"] for h in hidden])
            in_index = await store.low_quality_count(bar)
        hidden = [
            {**h, "quality": round(scores[h["chunk_id"]], 3)}
            for h in hidden
            if h["chunk_id"] in scores and scores[h["chunk_id"]] < bar
        ]
        out: dict[str, Any] = {
            "min_quality": floor,
            "set_by": set_by,
            "threshold": self.quality.threshold,
            "hidden_in_index": in_index if floor is not None else 0,
            "hidden_results": hidden,
            "results_quality": [round(scores.get(cid, 1.0), 3) for cid in shown],
        }
        if floor is None:  # nothing hidden: which shown results the threshold would hide, and how many in all
            out["would_hide"] = [
                {"rank": i, "chunk_id": cid, "path": r["path"], "quality": round(scores[cid], 3)}
                for i, (cid, r) in enumerate(zip(shown, response["results"], strict=True), 1)
                if cid in scores and scores[cid] < bar
            ]
            out["would_hide_in_index"] = in_index
        return out

    async def _full_text_legs(
        self,
        store: SearchReads,
        run: Run,
        use_fts: bool,
        spare: Spare | None = None,
    ) -> None:
        """Every full-text leg of the plan, into `run.legs` and `run.evidence`."""
        full_text = fulltext.plan(run.cq, run.bigrams, use_fts)
        done: dict[str, tuple[list[tuple[int, float]], float | None]] = {}
        done_every: dict[str, tuple[list[tuple[int, float]], float | None]] = {}  # explain with a floor

        async def leg(reads_: SearchReads, name: str, query: TextQuery, terms: list[str]) -> None:
            t = time.perf_counter()
            kept = await fulltext.without_common_terms(reads_, query)
            dropped = run.exclude if fulltext.excludes_by_id(name) else (run.left_out or None)
            if run.every_legs is None:
                scored = await reads_.text_scored(kept, run.n, run.weights, run.allowed_docs, dropped)
            else:  # explain with a floor: over every chunk, the floor applied here

                async def deep(depths: list[int]) -> tuple[list[list[tuple[int, float]]], None]:
                    return [await reads_.text_scored(kept, depths[0], run.weights, run.allowed_docs, dropped)], None

                (scored,), (every,), _ = await self._kept_and_every(reads_, run, [run.n], deep)
                done_every[name] = (every, await leg_evidence(reads_, query.kind, terms, every))
            done[name] = (scored, await leg_evidence(reads_, query.kind, terms, scored))
            run.timings[f"{name}_ms"] = _ms(t)
            run.kept[name] = kept
            if run.sent is not None:
                run.sent[name] = await reads_.sent_expression(kept)

        async def in_turn(reads_: SearchReads, legs: list[fulltext.Leg]) -> None:
            for args in legs:
                await leg(reads_, *args)

        started = time.perf_counter()  # the wall of the whole full-text half (its legs may run at once)
        together = False
        if len(full_text) >= 2 and spare is not None:
            async with spare() as other:
                if other is not None:
                    # The first leg on this connection, the others on the spare one, at once.
                    together = True
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(in_turn, store, full_text[:1])
                        view = other.searching(self.vectors, None if run.every_legs is not None else run.min_quality)
                        tg.start_soon(in_turn, view, full_text[1:])
        if not together:
            await in_turn(store, full_text)
        if full_text:
            run.timings["fulltext_ms"] = _ms(started)
        for name, *_ in full_text:  # in a fixed order, whichever leg finished first
            scored, ev = done[name]
            run.legs[name] = [(cid, -bm25) for cid, bm25 in scored]
            if ev is not None:
                run.evidence[name] = ev
            if run.every_legs is not None:
                every, ev = done_every[name]
                run.every_legs[name] = [(cid, -bm25) for cid, bm25 in every]
                if ev is not None:
                    run.every_evidence[name] = ev

    async def _fuse_and_refine(self, store: SearchReads, run: Run) -> dict[str, Any]:
        """Fusion, the refine stages and match spans over `run`'s legs; the response."""
        req, cq, s, n = run.req, run.cq, self.settings, run.n
        evidence, timings, sent = run.evidence, run.timings, run.sent
        legs = {name: scored for name, scored in run.legs.items() if scored}
        leg_weights = fusion_weights(s.fusion, legs, evidence)
        if s.fusion.method == "rrf":
            fused = weighted_rrf({k: [c for c, _ in v] for k, v in legs.items()}, leg_weights, k=s.fusion.rrf_k)
        else:
            fused = z_fusion(legs, leg_weights, complete_legs(legs, n))
        ranks = {name: {cid: i for i, (cid, _) in enumerate(scored, 1)} for name, scored in legs.items()}
        fts_ids = [cid for name in FULL_TEXT_LEGS for cid, _ in legs.get(name, [])]
        vec_ids = [cid for cid, _ in legs.get("vector", [])]
        fts_rank: dict[int, int] = {}
        for name in FULL_TEXT_LEGS:
            for cid, r in ranks.get(name, {}).items():
                fts_rank[cid] = min(r, fts_rank.get(cid, r))
        vec_rank = ranks.get("vector", {})

        mmr_on = s.mmr.enabled if req.mmr is None else req.mmr
        rerank_on, reranker = self._reranker_for(req)
        if mmr_on:
            pool = n
        elif rerank_on:
            pool = req.limit * 5
        else:
            pool = req.limit
        head = fused[: max(pool, CONFIDENCE_DEPTH)]
        rows = await store.fetch_hits([cid for cid, _ in head])
        hits = [
            Hit(**rows[cid], score=score, fts_rank=fts_rank.get(cid), vec_rank=vec_rank.get(cid))
            for cid, score in head
            if cid in rows
        ]
        conf = is_low_confidence(s, hits, req.min_confidence_ratio)
        hits = hits[:pool]

        # Stage 2: reranker.
        if rerank_on and reranker is not None and hits:
            t = time.perf_counter()
            hits = rerank_hits(hits, cq.vector_text, reranker)
            timings["rerank_ms"] = _ms(t)
        # Stage 3: MMR.
        lam = s.mmr.lambda_ if req.mmr_lambda is None else req.mmr_lambda
        penalty = s.mmr.same_doc_penalty if req.mmr_same_doc_penalty is None else req.mmr_same_doc_penalty
        warnings = mmr_warnings(mmr_on, req.mmr_lambda, lam)
        for w in warnings:
            log.warning("mmr_config", message=w)
        if mmr_on and hits:
            t = time.perf_counter()
            vectors = await store.fetch_vectors([h.chunk_id for h in hits])
            hits = apply_mmr(hits, vectors, req.limit, lam, penalty)
            timings["mmr_ms"] = _ms(t)
        hits = hits[: req.limit]
        # Stage 4: parent retriever.
        parent_on = s.parent_retriever.enabled if req.parent_retriever is None else req.parent_retriever
        if parent_on and hits:
            t = time.perf_counter()
            doc_rows = await store.fetch_doc_chunks(sorted({h.doc_id for h in hits}))
            infos = {d: [ChunkInfo(*r) for r in rs] for d, rs in doc_rows.items()}
            hits = apply_parent(
                hits,
                infos,
                s.parent_retriever.whole_doc_threshold_tokens,
                s.parent_retriever.max_expanded_tokens,
            )
            timings["parent_ms"] = _ms(t)
        # Match spans over the final content.
        phrases = list(cq.positives) or ([cq.vector_text] if cq.vector_text else [])
        hits = apply_match_spans(hits, phrases)

        pending = await store.pending_count()
        # off_topic reads raw cosines, except when the best passage is in the other language than the query's:
        # then the language-centred scores the vector leg ranked with (search/offtopic.py, decision 0017)
        centred = run.across and run.calibration is not None and run.calibration.centred
        signal = offtopic.features(
            legs if centred or run.raw_vector is None else {**legs, "vector": run.raw_vector},
            evidence,
            run.calibration,
            centred=centred,
            cjk=language.is_cjk_text(cq.vector_text),
        )
        response: dict[str, Any] = {
            "results": [h.to_dict() for h in hits],
            "low_confidence": conf,
            # A filter that leaves no note searched nothing: that says nothing of whether the notes cover the query.
            "off_topic": run.filter_miss is None
            and offtopic.is_off_topic(signal, has_results=bool(hits), offset=s.off_topic.threshold_offset),
            "off_topic_evidence": signal,  # for groove eval and explain; not a field of the answer
            "filter_applied": _applied(req, s),
            "pending_chunks": pending,
            "vectors_degraded": run.degraded,
        }
        if run.filter_miss is not None:  # present only when it happened, like warnings
            response["filter_matched_nothing"] = run.filter_miss
        if warnings:
            response["warnings"] = warnings
        if req.explain:
            timings["total_ms"] = _ms(run.started)
            response["explain"] = dict(
                query=cq.text,
                vector_text=cq.vector_text,
                # The seeds' expression of the query as the user wrote it; the full-text tables receive
                # it folded (decision 0018): folded_match_expr, trigram_expr, sent_to_fts5.
                match_expr=cq.written_expr,
                folded_match_expr=cq.match_expr,
                negative_expr=cq.negative_expr,
                positives=list(cq.positives),
                excluded_terms=list(cq.negatives),
                excluded_chunks=len(run.exclude),
                vector_only=cq.vector_only or req.retriever == "vector",
                fallback=cq.fallback,
                phrases_truncated=cq.truncated,
                retriever=req.retriever,
                candidates={
                    "fts": len(set(fts_ids)),
                    "vector": len(vec_ids),
                    "fused": len(fused),
                    **{f"{name}": len(v) for name, v in legs.items()},
                },
                trigram_expr=cq.trigram_expr,
                word_expr=cq.word_expr,
                words=list(cq.words),
                bigram_expr=cjk_query(cq.vector_text) if run.bigrams is not None else None,
                # What each full-text leg ran, and the common terms it left out (decision 0010).
                sent_to_fts5=dict(sent or {}),
                common_terms_left_out={
                    name: fulltext.left_out(query, run.kept[name])
                    for name, query, _ in fulltext.plan(cq, run.bigrams)
                    if name in run.kept and name in (sent or {})
                },
                fusion={
                    "method": s.fusion.method,
                    "weights": leg_weights,
                    "evidence": evidence,
                    "evidence_low": s.fusion.evidence_low,
                    "evidence_high": s.fusion.evidence_high,
                },
                off_topic={
                    **signal,
                    "score": offtopic.score(signal),
                    **offtopic.thresholds(signal, s.off_topic.threshold_offset),
                    "calibration": run.calibration.to_dict() if run.calibration else None,
                },
                language_centres=run.centres.describe() if run.centres else None,
                pool_per_retriever=n,
                refine_pool=pool,
                allowed_documents=None if run.allowed_docs is None else len(run.allowed_docs),
                stages={"rerank": bool(rerank_on and reranker), "mmr": mmr_on, "parent_retriever": parent_on},
                reranker=getattr(reranker, "identity", None) if rerank_on else None,
                rrf_k=s.fusion.rrf_k,
                weights={
                    "heading": s.fusion.heading_weight,
                    "context": s.fusion.context_weight,
                    "content": s.fusion.content_weight,
                },
                timings_ms=timings,
            )
        return response

    def _reranker_for(self, req: SearchRequest) -> tuple[bool, Reranker | None]:
        want = self.settings.rerank_by_default if req.rerank is None else req.rerank
        if not want or self.reranker is None:
            return False, None
        model = self.reranker()
        return model is not None, model


def rerank_hits(hits: list[Hit], query: str, reranker: Reranker) -> list[Hit]:
    """Re-score with a cross-encoder over each chunk's context and content; score = raw reranker score."""
    texts = [f"{h.context}\n{h.content}" if h.context else h.content for h in hits]
    scores = reranker.score(query, texts)
    rescored = [dataclasses.replace(h, score=float(sc)) for h, sc in zip(hits, scores, strict=True)]
    order = sorted(range(len(rescored)), key=lambda i: (-rescored[i].score, i))
    return [rescored[i] for i in order]


def mmr_warnings(mmr_on: bool, lambda_override: float | None, effective_lambda: float) -> list[str]:
    out = []
    if not mmr_on and lambda_override is not None:
        out.append(
            "mmr_lambda was given but MMR is off, so it has no effect; pass mmr=true or set [search.mmr] enabled = true"
        )
    if mmr_on and effective_lambda >= 1.0:
        out.append("MMR is on with lambda = 1.0, which is the same as MMR off but slower; turn MMR off instead")
    return out


def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 3)
