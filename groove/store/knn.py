"""The vector leg of a search over any store: each query's nearest chunks, and the vectors of the chunks returned.

One algorithm for the SQLite and the PostgreSQL store (decisions 0012, 0019, 0020, 0022); each store says
only how it reads (`StoredVectors`). With the process's in-memory copy (store/memory.py) the distances of
every query come from one pass over the snapshot's matrix and the chunks' vectors from the snapshot: the
store is asked only which chunks carry which vector ids. Without a copy (one-shot commands, over the memory
budget, a copy that cannot answer) the store's own KNN answers query by query (sqlite-vec's scan, pgvector's
HNSW) and the vectors are read from the store.

- A filter (allowed documents): distances over the allowed chunks' vectors only (an exact scan in the
  store when there is no snapshot), so a filtered leg returns `limit` hits whenever that many exist.
- A quality floor (decision 0020): the KNN asks for a few more vectors than `limit`; when fewer than
  `limit` kept chunks are among them, for as many more as the hidden chunks hold (past the store's KNN
  limit, an exact scan of the chunks kept instead).
- Several chunks can carry one vector (the same text); a vector the snapshot holds that no chunk carries
  any more maps to no chunk, so a stale snapshot never answers wrongly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import anyio
import numpy as np

from groove.store.memory import Snapshot, VectorMatrix, VectorSource

Legs = list[list[tuple[int, float]]]


class StoredVectors(VectorSource, Protocol):
    """What the vector leg reads from a store, on one connection (and the in-memory copy's `VectorSource`)."""

    @property
    def knn_limit(self) -> int | None:
        """The most vectors the store's own KNN returns at once (None: no limit)."""

    async def nearest_vectors(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The store's own KNN: (vector id, L2 distance) of the `k` stored vectors nearest `query`, nearest first."""

    async def scan_chunks(
        self, query: np.ndarray, allowed_docs: Sequence[int] | None, min_quality: float | None, k: int
    ) -> list[tuple[int, float]]:
        """An exact distance scan in the store: (chunk id, L2 distance) of the `k` nearest chunks with a vector of
        the allowed documents (all, when None) scoring at least `min_quality`, nearest first, ties by id."""

    async def chunk_vectors(self, allowed_docs: Sequence[int], min_quality: float | None) -> list[tuple[int, int]]:
        """(chunk id, vector id) of every chunk with a vector in the allowed documents, scoring at least
        `min_quality`."""

    async def chunks_of_vectors(self, emb_ids: Sequence[int], min_quality: float | None) -> list[tuple[int, int]]:
        """(chunk id, vector id) of every chunk carrying one of these vectors, scoring at least `min_quality`."""

    async def hidden_vector_count(self, min_quality: float) -> int:
        """How many vectors the chunks scoring under `min_quality` hold."""

    async def fetch_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of these chunks."""


async def vector_legs(
    store: StoredVectors,
    matrix: VectorMatrix | None,
    queries: Sequence[tuple[np.ndarray, int]],
    exclude: set[int] | None = None,
    allowed_docs: Sequence[int] | None = None,
    min_quality: float | None = None,
    *,
    vectors: bool = True,
) -> tuple[Legs, dict[int, np.ndarray]]:
    """Each (query, limit)'s (chunk id, L2 distance) nearest first, and (with `vectors`) the vector of every
    chunk returned: from `matrix`'s snapshot when it answers, else from the store (see the module doc)."""
    exclude = exclude or set()
    snap = await matrix.usable(store) if matrix is not None else None
    legs: Legs = [[] for _ in queries]
    emb_of: dict[int, int] = {}  # chunk id -> vector id, for the vectors from the snapshot
    if allowed_docs is not None:
        rows = None
        if snap is not None:
            pairs = [(cid, e) for cid, e in await store.chunk_vectors(allowed_docs, min_quality) if cid not in exclude]
            rows = snap.rows_of(sorted({e for _, e in pairs}))
        if snap is not None and rows is not None:
            nears = await anyio.to_thread.run_sync(
                snap.nearest_many, [q for q, _ in queries], [k for _, k in queries], rows
            )
            for i, (near, (_, limit)) in enumerate(zip(nears, queries, strict=True)):
                dist = dict(near)
                ranked = sorted(((dist[e], cid) for cid, e in pairs if e in dist))
                legs[i] = [(cid, d) for d, cid in ranked][:limit]
            emb_of = dict(pairs)
        else:
            snap = None
            for i, (query, limit) in enumerate(queries):
                legs[i] = await _scanned(store, query, allowed_docs, min_quality, limit, exclude)
        return legs, await _leg_vectors(store, legs, snap, emb_of) if vectors else {}
    hidden = await store.hidden_vector_count(min_quality) if min_quality else 0
    # With a floor, a few of the hidden chunks' vectors are asked for as well: `limit` kept chunks among the
    # nearest vectors are the nearest kept chunks, so a first round that finds them is exact; else a second
    # asks for as many more as the hidden chunks hold.
    extras = [list(dict.fromkeys((min(hidden, max(limit, 16)), hidden))) for _, limit in queries]
    todo = list(range(len(queries)))
    for round_ in range(2):
        todo = [i for i in todo if round_ < len(extras[i])]
        if not todo:
            break
        asked = {i: queries[i][1] + len(exclude) + extras[i][round_] for i in todo}
        found: dict[int, list[tuple[int, float]]] = {}
        if snap is not None:
            nears = await anyio.to_thread.run_sync(
                snap.nearest_many, [queries[i][0] for i in todo], [asked[i] for i in todo]
            )
            found = dict(zip(todo, nears, strict=True))
        else:
            for i in todo:
                if min_quality and store.knn_limit is not None and asked[i] > store.knn_limit:
                    # more than the store's KNN gives: a scan of the chunks kept
                    legs[i] = await _scanned(store, queries[i][0], None, min_quality, queries[i][1], exclude)
                    continue
                found[i] = await store.nearest_vectors(queries[i][0], asked[i])
        wanted = sorted({e for near in found.values() for e, _ in near})
        chunks_of: dict[int, list[int]] = {}
        for cid, e in await store.chunks_of_vectors(wanted, min_quality) if wanted else []:
            if cid not in exclude:
                chunks_of.setdefault(e, []).append(cid)
                emb_of[cid] = e
        todo = []
        for i, near in found.items():
            limit = queries[i][1]
            out = sorted((rank, cid, float(d)) for rank, (e, d) in enumerate(near) for cid in chunks_of.get(e, ()))
            legs[i] = [(cid, d) for _, cid, d in out][:limit]
            if near and len(out) < limit and len(near) >= asked[i]:
                todo.append(i)
    return legs, await _leg_vectors(store, legs, snap, emb_of) if vectors else {}


async def _scanned(
    store: StoredVectors,
    query: np.ndarray,
    allowed_docs: Sequence[int] | None,
    min_quality: float | None,
    limit: int,
    exclude: set[int],
) -> list[tuple[int, float]]:
    rows = await store.scan_chunks(query, allowed_docs, min_quality, limit + len(exclude))
    return [r for r in rows if r[0] not in exclude][:limit]


async def _leg_vectors(
    store: StoredVectors, legs: Legs, snap: Snapshot | None, emb_of: dict[int, int]
) -> dict[int, np.ndarray]:
    """The vectors of the legs' chunks: from the snapshot the legs were ranked on (`snap`, with each chunk's
    vector id in `emb_of`), else read from the store."""
    ids = list(dict.fromkeys(cid for leg in legs for cid, _ in leg))
    if snap is not None and all(cid in emb_of for cid in ids):
        rows = snap.vectors_of([emb_of[cid] for cid in ids])
        if rows is not None:
            return {cid: rows[emb_of[cid]] for cid in ids}
    return await store.fetch_vectors(ids)
