"""Maximal Marginal Relevance: diversity re-rank of the candidate pool (stage 3).

At each step the candidate maximising

    lambda * rel(c) - (1 - lambda) * max_sim(c, picked)
                    - same_doc_penalty * 1[doc(c) in picked docs]

is picked, where ``rel`` is the relevance score min-max normalised to [0, 1]
over the pool (so lambda means the same thing for RRF scores of ~0.01 and
reranker scores of ~[-10, 10]) and ``max_sim`` is the largest cosine
similarity between ``c``'s vector and the vectors already picked.

Pure: numpy over plain data. Vectors are normalised once and the pool's
similarity matrix is computed once; each greedy step is a vector operation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from groove.search.hits import Hit


def _validate(limit: int, lambda_: float, same_doc_penalty: float) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"mmr limit must be an integer of at least 0, got {limit!r}")
    if not (isinstance(lambda_, (int, float)) and 0.0 <= lambda_ <= 1.0):
        raise ValueError(f"mmr lambda must be between 0.0 and 1.0 inclusive (the default is 0.7), got {lambda_!r}")
    if not (isinstance(same_doc_penalty, (int, float)) and math.isfinite(same_doc_penalty) and same_doc_penalty >= 0):
        raise ValueError(
            "mmr same_doc_penalty must be a finite number of at least 0.0 (the default is 0.0), got "
            f"{same_doc_penalty!r}"
        )


def _similarity_matrix(ids: Sequence[int], vectors: Mapping[int, np.ndarray]) -> np.ndarray:
    """Cosine similarity between every pair of candidates, shape (n, n).

    A candidate without a vector (or with an all-zero vector) gets a zero
    row, so its similarity to everything is 0.
    """
    n = len(ids)
    present = [i for i, chunk_id in enumerate(ids) if vectors.get(chunk_id) is not None]
    if not present:
        return np.zeros((n, n))
    rows = [np.asarray(vectors[ids[i]], dtype=np.float64).ravel() for i in present]
    dims = {row.shape[0] for row in rows}
    if len(dims) != 1:
        raise ValueError(f"mmr vectors must all have the same dimension, got dimensions {sorted(dims)}")
    matrix = np.zeros((n, rows[0].shape[0]))
    matrix[present] = np.vstack(rows)
    if not np.all(np.isfinite(matrix)):
        raise ValueError("mmr vectors must be finite (a NaN or infinity came from the vector store)")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit @ unit.T


def mmr_select(
    candidates: Sequence[tuple[int, float, int]],
    vectors: Mapping[int, np.ndarray],
    limit: int,
    lambda_: float = 0.7,
    same_doc_penalty: float = 0.0,
) -> list[int]:
    """Pick ``min(limit, len(candidates))`` chunk ids greedily, in pick order.

    ``candidates`` are ``(chunk_id, relevance score, doc_id)``, best first.
    The first pick is the most relevant candidate; a tie on the objective
    goes to the earlier candidate. ``vectors`` maps chunk id to embedding; a
    candidate missing from it has similarity 0 to everything. With
    ``lambda_ == 1`` and no penalty the result is the relevance order.
    """
    _validate(limit, lambda_, same_doc_penalty)
    ids = [int(c[0]) for c in candidates]
    if len(set(ids)) != len(ids):
        raise ValueError("mmr candidates must have distinct chunk ids; the fused list repeated one")
    n = len(ids)
    count = min(limit, n)
    if count == 0:
        return []

    rel = np.array([float(c[1]) for c in candidates], dtype=np.float64)
    if not np.all(np.isfinite(rel)):
        raise ValueError("mmr relevance scores must be finite")
    low, high = rel.min(), rel.max()
    rel_norm = np.ones(n) if high == low else (rel - low) / (high - low)

    docs = [c[2] for c in candidates]
    doc_index = {doc: i for i, doc in enumerate(dict.fromkeys(docs))}
    doc_of = np.array([doc_index[d] for d in docs])

    sim = _similarity_matrix(ids, vectors)

    picked: list[int] = []
    available = np.ones(n, dtype=bool)
    max_sim = np.full(n, -np.inf)
    doc_picked = np.zeros(len(doc_index), dtype=bool)

    first = int(np.argmax(rel_norm))  # argmax returns the earliest maximum
    for _ in range(count):
        if picked:
            objective = lambda_ * rel_norm - (1.0 - lambda_) * max_sim - same_doc_penalty * doc_picked[doc_of]
            objective = np.where(available, objective, -np.inf)
            choice = int(np.argmax(objective))
        else:
            choice = first
        picked.append(choice)
        available[choice] = False
        max_sim = np.maximum(max_sim, sim[:, choice])
        doc_picked[doc_of[choice]] = True
    return [ids[i] for i in picked]


def apply_mmr(
    hits: list[Hit],
    vectors: Mapping[int, np.ndarray],
    limit: int,
    lambda_: float = 0.7,
    same_doc_penalty: float = 0.0,
) -> list[Hit]:
    """Stage 3 over hits: the picked hits (same objects) in pick order.

    Scores and ranks are left as they were; only the order and the length
    change.
    """
    by_id = {hit.chunk_id: hit for hit in hits}
    order = mmr_select(
        [(hit.chunk_id, hit.score, hit.doc_id) for hit in hits],
        vectors,
        limit,
        lambda_=lambda_,
        same_doc_penalty=same_doc_penalty,
    )
    return [by_id[chunk_id] for chunk_id in order]
