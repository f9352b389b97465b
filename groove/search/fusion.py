"""Reciprocal Rank Fusion of the retrieval legs, and the low-confidence signal.

Pure functions over chunk ids and scores: no database, no model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

DEFAULT_RRF_K = 60.0


def rrf(rankings: Mapping[str, Sequence[int]], k: float = DEFAULT_RRF_K) -> list[tuple[int, float]]:
    """Fuse ranked lists of chunk ids with Reciprocal Rank Fusion.

    ``rankings`` maps a leg name (``"fts"``, ``"vec"``) to the chunk ids that
    leg returned, best first. A chunk's fused score is the sum, over the legs
    that returned it, of ``1 / (k + rank)`` with 1-based ranks; a leg that did
    not return a chunk contributes nothing. If a leg lists an id twice, only
    its first (best) position counts.

    Returns ``(chunk_id, score)`` sorted by score descending. Equal scores are
    ordered by the best rank the chunk reached in any single leg, then by
    chunk id, so the output never depends on dict or set iteration order.
    Scores are summed with ``math.fsum``, which is exact up to one final
    rounding, so two chunks with the same multiset of ranks get bit-identical
    scores whatever order the legs are listed in.
    """
    if not (isinstance(k, (int, float)) and math.isfinite(k) and k > 0):
        raise ValueError(f"rrf k must be a finite number greater than 0 (the default is 60), got {k!r}")

    terms: dict[int, list[float]] = {}
    best_rank: dict[int, int] = {}
    for ids in rankings.values():
        seen: set[int] = set()
        for position, chunk_id in enumerate(ids, start=1):
            if chunk_id in seen:
                continue
            seen.add(chunk_id)
            terms.setdefault(chunk_id, []).append(1.0 / (k + position))
            if position < best_rank.get(chunk_id, position + 1):
                best_rank[chunk_id] = position

    fused = [(chunk_id, math.fsum(parts)) for chunk_id, parts in terms.items()]
    fused.sort(key=lambda item: (-item[1], best_rank[item[0]], item[0]))
    return fused


def low_confidence(scores: Sequence[float], ratio: float = 1.5, n: int = 10) -> bool:
    """True when the top score does not stand out from the rest.

    The test is ``top1 / mean(top n scores) < ratio``, where "top n" are the
    ``n`` largest scores (the order of ``scores`` does not matter; the top
    score is part of the mean).

    Decisions for the edge cases:

    * fewer than 2 scores -> False: there is nothing to compare against, and
      a single answer is not evidence of a flat result list;
    * all top-n scores zero -> True: nothing distinguishes the top result,
      the same verdict as any other flat list (all equal gives a ratio of 1);
    * scores must be finite and non-negative (RRF scores are). A ratio
      against a mean is meaningless when scores can be negative (a raw
      reranker score), so that raises ValueError rather than answering
      something arbitrary: pass the RRF scores.
    """
    if not (math.isfinite(ratio) and ratio > 0):
        raise ValueError(f"low_confidence ratio must be a finite number greater than 0, got {ratio!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"low_confidence n must be an integer of at least 2 (the top score and one other), got {n!r}")
    values = [float(s) for s in scores]
    for value in values:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"low_confidence needs finite, non-negative scores such as RRF scores, got {value!r}")
    if len(values) < 2:
        return False
    top = sorted(values, reverse=True)[:n]
    mean = math.fsum(top) / len(top)
    if mean == 0.0:
        return True
    return top[0] / mean < ratio


def weighted_rrf(
    rankings: Mapping[str, Sequence[int]], weights: Mapping[str, float], k: float = DEFAULT_RRF_K
) -> list[tuple[int, float]]:
    """RRF where leg `name` contributes `weights[name] / (k + rank)` (a missing weight is 1)."""
    if not (isinstance(k, (int, float)) and math.isfinite(k) and k > 0):
        raise ValueError(f"rrf k must be a finite number greater than 0 (the default is 60), got {k!r}")
    terms: dict[int, list[float]] = {}
    best_rank: dict[int, int] = {}
    for name, ids in rankings.items():
        w = float(weights.get(name, 1.0))
        seen: set[int] = set()
        for position, chunk_id in enumerate(ids, start=1):
            if chunk_id in seen:
                continue
            seen.add(chunk_id)
            terms.setdefault(chunk_id, []).append(w / (k + position))
            best_rank[chunk_id] = min(best_rank.get(chunk_id, position), position)
    fused = [(cid, math.fsum(parts)) for cid, parts in terms.items()]
    fused.sort(key=lambda item: (-item[1], best_rank[item[0]], item[0]))
    return fused


def z_fusion(
    legs: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float],
    complete: Mapping[str, float] | None = None,
) -> list[tuple[int, float]]:
    """Fuse scored legs (higher is better) by weighted, standardised scores.

    Each leg's scores are standardised over its own list (z = (s - mean) / sd)
    and shifted so that its last entry scores 0; a chunk's fused score is the
    weighted sum over the legs that returned it (a leg that did not contributes
    0, as if it ranked the chunk last). Unlike RRF, a leg whose best hit stands
    far above the rest keeps that margin, and a flat leg adds little. A leg
    with weight 0 is ignored. Ties: best single-leg position, then chunk id.

    `complete` names the legs that returned every chunk they match (fewer than
    asked), each with the score of a chunk it does not match (a full-text leg's:
    0, no bm25). That score is then the leg's last entry: without it, a leg that
    found one chunk, a rare word's only note, would score its one hit 0.
    """
    totals: dict[int, list[float]] = {}
    best_rank: dict[int, int] = {}
    for name, scored in legs.items():
        w = float(weights.get(name, 1.0))
        if w <= 0 or not scored:
            continue
        values = [s for _, s in scored]
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"leg {name!r} has a score that is not finite")
        if complete and name in complete:
            values.append(float(complete[name]))
        mean = math.fsum(values) / len(values)
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)) or 1.0
        low = min(values)
        seen: set[int] = set()
        for position, (chunk_id, value) in enumerate(scored, start=1):
            if chunk_id in seen:
                continue
            seen.add(chunk_id)
            totals.setdefault(chunk_id, []).append(w * (value - low) / sd)
            best_rank[chunk_id] = min(best_rank.get(chunk_id, position), position)
    fused = [(cid, math.fsum(parts)) for cid, parts in totals.items()]
    fused.sort(key=lambda item: (-item[1], best_rank[item[0]], item[0]))
    return fused


def evidence_weight(evidence: float, low: float, high: float) -> float:
    """0 at or below `low`, 1 at or above `high`, linear between: how far to trust a full-text leg."""
    if high <= low:
        return 1.0 if evidence >= high else 0.0
    return min(1.0, max(0.0, (evidence - low) / (high - low)))
