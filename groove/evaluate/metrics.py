"""Retrieval metrics over ranked hits (pure).

A query's expected items are matched against the ranked result list; each
expected item counts once, at the first rank where a hit matches it.
recall@k = found in top k / expected (for each cut-off k, `--k`); MRR = 1 /
first matching rank; nDCG@10 with binary gains. Abstention: the share of
answerable queries flagged `off_topic` (lower is better) and the share of
unanswerable ones flagged (higher is better).

METRIC_VERSION changes whenever a number computed here would change for the
same ranked lists: eval history never compares runs of two versions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

# What `groove tune` can maximise (here, not in tune.py, so that the CLI names them without importing numpy).
TUNE_METRICS = ("ndcg@10", "mrr", "recall@1", "recall@5", "recall@10")

H = TypeVar("H")
E = TypeVar("E")

KS = (1, 5, 10)
METRIC_VERSION = 1
# Metrics where a rise is the regression (the history's gate reads it); every other one falls.
LOWER_IS_BETTER = frozenset({"off_topic_answerable"})


def first_ranks(hits: Sequence[H], expected: Sequence[E], matches: Callable[[H, E], bool]) -> list[int | None]:
    """For each expected item, the 1-based rank of the first hit matching it (None if absent)."""
    out: list[int | None] = []
    for item in expected:
        rank = next((i for i, h in enumerate(hits, 1) if matches(h, item)), None)
        out.append(rank)
    return out


@dataclass(frozen=True)
class QueryScore:
    recall: dict[int, float]
    rr: float
    ndcg10: float


def parse_ks(text: str) -> tuple[int, ...]:
    """`1,5,10,20` -> (1, 5, 10, 20): distinct positive cut-offs, sorted; ValueError saying what is wrong."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ValueError("give at least one cut-off, e.g. 1,5,10")
    out = set()
    for p in parts:
        try:
            k = int(p)
        except ValueError:
            raise ValueError(f"{p!r} is not a whole number; write the cut-offs like 1,5,10,20") from None
        if not 1 <= k <= 100:
            raise ValueError(f"cut-off {k} is outside 1..100")
        out.add(k)
    return tuple(sorted(out))


def score_query(ranks: Sequence[int | None], n_expected: int, ks: Sequence[int] = KS) -> QueryScore:
    if n_expected <= 0:
        raise ValueError("a judged query needs at least one expected item")
    found = sorted(r for r in ranks if r is not None)
    recall = {k: sum(1 for r in found if r <= k) / n_expected for k in ks}
    rr = 1.0 / found[0] if found else 0.0
    dcg = sum(1.0 / math.log2(r + 1) for r in found if r <= 10)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(n_expected, 10) + 1))
    return QueryScore(recall=recall, rr=rr, ndcg10=dcg / idcg)


def aggregate(scores: Sequence[QueryScore], ks: Sequence[int] = KS) -> dict[str, float]:
    n = len(scores)
    if n == 0:
        return {**{f"recall@{k}": 0.0 for k in ks}, "mrr": 0.0, "ndcg@10": 0.0}
    out = {f"recall@{k}": sum(s.recall[k] for s in scores) / n for k in ks}
    out["mrr"] = sum(s.rr for s in scores) / n
    out["ndcg@10"] = sum(s.ndcg10 for s in scores) / n
    return {k: round(v, 4) for k, v in out.items()}


def flagged_shares(flags: Sequence[tuple[bool, bool]]) -> tuple[float | None, float | None]:
    """(unanswerable, flagged off_topic) per query -> (share of answerable flagged, share of
    unanswerable flagged), unrounded; None for a kind the set has no query of."""
    answerable = [f for u, f in flags if not u]
    unanswerable = [f for u, f in flags if u]
    return (
        sum(answerable) / len(answerable) if answerable else None,
        sum(unanswerable) / len(unanswerable) if unanswerable else None,
    )


def abstention(flags: Sequence[tuple[bool, bool]]) -> dict[str, float]:
    """(unanswerable, flagged off_topic) per query -> `off_topic_answerable`, the share of answerable
    queries flagged (false alarms), and `off_topic_unanswerable`, the share of unanswerable ones
    flagged; each only when the set has queries of that kind."""
    shares = zip(("off_topic_answerable", "off_topic_unanswerable"), flagged_shares(flags), strict=True)
    return {k: round(v, 4) for k, v in shares if v is not None}


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float | None:
    """The probability that a positive scores above a negative (ties count half): how well a score
    separates two sets whatever the threshold; None when a set is empty."""
    if not positive or not negative:
        return None
    wins = 0.0
    for p in positive:
        for n in negative:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return round(wins / (len(positive) * len(negative)), 4)
