"""Language centres: take the language out of the vector leg's similarity in a mixed-language index.

A multilingual model places every text of one language near that language's mean vector: a
Japanese question is nearer any Japanese passage than the English passage that answers it. On
the example notes, `非同期ランタイムの使い方` put `reference/rust-async.md` 19th by raw cosine,
behind every Japanese journal entry; on the bilingual fixture the vector leg alone put the
Japanese note of an English question first for 4 of 8, and the English note of a Japanese
question first for 1 of 6 (decision 0019).

The cure is the one the multilingual-representation literature measured (centring each language,
Libovický et al. 2020): subtract the language's mean from the query and from each passage before
comparing them. With `m(x)` the mean vector of x's language in this index (measured on a sample of
its own passages), A = ALPHA and B = BETA:

    other language:  score(q, c) = (c - A m(c)) . (q - A m(q))
    same language:   score(q, c) = (c - A m(q)) . (q - A m(q)), with A's share of `c . m(q)` cut to B
                                 = c . q - B c . m(q) - (A - B) m(q) . m(q) - A m(q) . q + A^2 m(q) . m(q)

The same-language line keeps only B of the passage's own pull to its language's mean (the rest by
its average, `m(q) . m(q)`, so both lines stay on one scale). Centring those passages fully cost
same-language questions in a mixed index (JaQuAD + SciFact sub-corpora in one index, vector leg
nDCG@10 0.959 -> 0.940 Japanese, 0.814 -> 0.754 English); B = 0 kept them (0.959, 0.807) but left
generic Japanese passages, near everything Japanese, above the English answer; B = 0.2 keeps
Japanese at 0.960 and English at 0.800, and puts the English runtime note first. A = 0.75: 0.5
left two English-to-Japanese questions of the fixture second, 1.0 cost English same-language
questions. Each line orders like a KNN: the raw query's for the own language (up to B's term), the
centred query's for the other, so a search runs both and weighs their union (decision 0019).

A passage's language is read off its vector: the side of the midpoint between the two means it
falls on (on the fixture's 124 passages this agreed with the text's script on every one). A
query's is its text's (CJK share). An index where either side has fewer than MIN_SIDE_SHARE of the
sample, or fewer than MIN_SIDE passages, has no centres: a one-language index ranks as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from groove.corpus.cjk import cjk_share

ALPHA = 0.75  # how much of each language's mean comes out
BETA = 0.2  # how much of it comes out of the passages of the query's own language
SAMPLE = 2000  # passages sampled to measure the means
MIN_SIDE = 16  # passages of each side needed, at least
MIN_SIDE_SHARE = 0.03  # and this share of the sample
CJK_TEXT = 0.2  # a text whose characters are at least this share CJK is on the CJK side
WIDEN = 3  # the KNN fetches this many times the pool before the languages are weighed
REUSE_DRIFT = 0.05  # centres serve until the collection moves by this share of itself
REUSE_MIN = 50  # or this many vectors


@dataclass(frozen=True)
class Centres:
    """The mean vector of each side (CJK text, other text) of one index's passages."""

    cjk: np.ndarray
    other: np.ndarray
    counts: tuple[int, int]  # passages of each side in the sample
    vectors: int  # vectors in the index when measured
    model: str

    def serves(self, model: str, vectors: int) -> bool:
        return model == self.model and abs(vectors - self.vectors) <= max(REUSE_DRIFT * self.vectors, REUSE_MIN)

    def query(self, vector: np.ndarray, text: str) -> np.ndarray:
        """The query with its language's mean (ALPHA of it) taken out: the vector the second KNN runs with."""
        centre = self.cjk if is_cjk_text(text) else self.other
        return (np.asarray(vector, dtype=np.float32) - ALPHA * centre).astype(np.float32)

    def sides(self, vectors: np.ndarray) -> np.ndarray:
        """True for each passage vector on the CJK side of the midpoint between the two means."""
        direction = self.cjk - self.other
        return (np.asarray(vectors, dtype=np.float32) - (self.cjk + self.other) / 2.0) @ direction > 0

    def scores(self, query: np.ndarray, text: str, vectors: np.ndarray) -> np.ndarray:
        """score(q, c) for each passage vector (module docstring), higher is nearer."""
        v = np.asarray(vectors, dtype=np.float32)
        q = np.asarray(query, dtype=np.float32)
        q_cjk = is_cjk_text(text)
        own, far = (self.cjk, self.other) if q_cjk else (self.other, self.cjk)
        centred = q - ALPHA * own
        same = (
            v @ q
            - BETA * (v @ own)
            - (ALPHA - BETA) * float(own @ own)
            - ALPHA * float(own @ q)
            + ALPHA * ALPHA * float(own @ own)
        )
        other = v @ centred - ALPHA * float(far @ centred)
        return np.where(self.sides(v) == q_cjk, same, other)

    def describe(self) -> dict[str, object]:
        return {
            "alpha": ALPHA,
            "beta": BETA,
            "cjk_passages": self.counts[0],
            "other_passages": self.counts[1],
            "vectors": self.vectors,
        }


def is_cjk_text(text: str) -> bool:
    return cjk_share([text]) >= CJK_TEXT


def measure(texts: Sequence[str], vectors: np.ndarray, *, model: str, size: int) -> Centres | None:
    """The two means from sampled passages (their text says their side); None for a one-language index."""
    if len(texts) == 0:
        return None
    v = np.asarray(vectors, dtype=np.float32)
    cjk = np.fromiter((is_cjk_text(t) for t in texts), dtype=bool, count=len(texts))
    n_cjk, n_other = int(cjk.sum()), int((~cjk).sum())
    least = max(MIN_SIDE, MIN_SIDE_SHARE * len(texts))
    if n_cjk < least or n_other < least:
        return None
    return Centres(
        cjk=v[cjk].mean(axis=0), other=v[~cjk].mean(axis=0), counts=(n_cjk, n_other), vectors=size, model=model
    )


def rerank(
    centres: Centres,
    query: np.ndarray,
    text: str,
    candidates: Sequence[int],
    vectors: dict[int, np.ndarray],
    limit: int,
) -> list[tuple[int, float]]:
    """(chunk id, score) of the `limit` best candidates by `Centres.scores`, best first (ties by id)."""
    ids = list(dict.fromkeys(cid for cid in candidates if cid in vectors))
    if not ids:
        return []
    s = centres.scores(query, text, np.stack([vectors[cid] for cid in ids]))
    order = sorted(range(len(ids)), key=lambda i: (-float(s[i]), ids[i]))[:limit]
    return [(ids[i], round(float(s[i]), 6)) for i in order]


def across(centres: Centres, text: str, ranked: Sequence[tuple[int, float]], vectors: dict[int, np.ndarray]) -> bool:
    """The best of `ranked` is a passage of the other language than the query's."""
    if not ranked or ranked[0][0] not in vectors:
        return False
    return bool(centres.sides(vectors[ranked[0][0]][None, :])[0] != is_cjk_text(text))


__all__ = ["ALPHA", "Centres", "SAMPLE", "WIDEN", "across", "is_cjk_text", "measure", "rerank"]
