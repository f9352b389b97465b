"""How much of the query a full-text leg's best hits actually contain (pure).

bm25 ranks whatever matches, and a query matches something almost always:
"how do I cook chicken" over Japanese notes still finds English notes that
contain "how". Its ranking says nothing about whether the best match is any
good. The evidence here does: the share of the query's information (each
term weighted by its inverse document frequency) that the best of the leg's
top hits contains. A full match of the rare words is near 1; a match on
"how" alone is near 0. Fusion weighs each full-text leg by it
(docs/decisions/0007).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def idf(df: int, n_docs: int) -> float:
    """BM25's inverse document frequency, never negative."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def coverage(terms: Sequence[str], weights: Sequence[float], texts: Sequence[str]) -> float:
    """max over `texts` of the weight share of `terms` found in it (case-folded substring), in [0, 1]."""
    total = math.fsum(weights)
    if not terms or total <= 0:
        return 0.0
    best = 0.0
    for text in texts:
        folded = text.casefold()
        found = math.fsum(w for t, w in zip(terms, weights, strict=True) if t.casefold() in folded)
        best = max(best, found / total)
    return best


def term_weights(terms: Sequence[str], df: Mapping[str, int], n_docs: int) -> list[float]:
    """idf per term; a term the table has never seen carries the weight of a term seen once."""
    return [idf(max(1, df.get(t, 1)), max(n_docs, 1)) for t in terms]
