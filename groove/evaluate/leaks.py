"""Golden queries that a note quotes word for word: a leaked answer makes any retriever look good.

One trigram query per golden query (each of its words as a phrase, all
required; FTS5 trigram phrases match substrings, case-insensitively) finds
the candidate chunks; each candidate is then confirmed on the text with
whitespace collapsed and case folded. Queries
shorter than MIN_CHARS are skipped: a keyword query ("sqlite wal") appearing
in notes is normal, a whole question appearing in one is not. The length is
counted in what suits each language: a Han or kana character carries more
than a Latin letter and counts CJK_WEIGHT, so the floor is 24 Latin characters
or 16 Japanese ones (a 21-character Japanese question is a whole question; a
7-character keyword query such as 味噌汁の作り方 is not).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groove.corpus.cjk import cjk_count
from groove.corpus.normalize import fold
from groove.evaluate.golden import JudgedQuery
from groove.store.protocols import IndexReads

MIN_CHARS = 24
CJK_WEIGHT = 1.5  # a Han or kana character counts as 1.5 Latin ones: 16 of them reach MIN_CHARS


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def weighted_length(text: str) -> float:
    """`text`'s length with each CJK character counted CJK_WEIGHT times, each other character once."""
    cjk = cjk_count(text)
    return len(text) - cjk + CJK_WEIGHT * cjk


async def quoted_queries(
    reads: IndexReads, queries: Sequence[JudgedQuery], min_chars: int = MIN_CHARS
) -> list[dict[str, Any]]:
    """[{id, query, paths}] for each query of at least `min_chars` (weighted_length: CJK characters count
    CJK_WEIGHT) that some note contains verbatim."""
    out = []
    for q in queries:
        wanted = _norm(q.query)
        if weighted_length(wanted) < min_chars:
            continue
        # The trigram table holds the text folded to one spelling (decision 0018); phrases of under
        # 3 characters never match.
        words = [f for f in (fold(w) for w in q.query.split()) if len(f) >= 3]
        if not words:
            continue
        found = await reads.texts_containing(words, 200)
        paths = sorted({p for p, texts in found if any(wanted in _norm(t) for t in texts)})
        if paths:
            out.append({"id": q.id, "query": q.query, "paths": paths})
    return out
