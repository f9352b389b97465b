"""Every stored vector in memory, for an exact nearest-neighbour search by one matrix product.

sqlite-vec's KNN is a brute-force scan in scalar C (this build has no SIMD flags: `vec_debug()`),
about 100 ms over 100,000 vectors of 384 dimensions; the same scan as one float32 matrix-vector
product through numpy's BLAS takes about 14 ms (decision 0012), and pgvector's HNSW index is
approximate. The vectors stay stored in the store, which remains the record and the one-shot
commands' path; a long-running process (the daemon, `groove eval`) keeps this copy and brings it
up to date before each search, whichever store holds them (a `VectorSource`):

- One statement per search reads the index's stamp: the model, the dimension, the highest vector
  id, and the count of vectors ever removed (moved by a trigger on every deleted vector, whoever
  deletes it).
- Vector ids are never reused (AUTOINCREMENT, schema 4), so new vectors are exactly the ids past
  the highest one held: only those are read. A removal drops the ids no longer stored. A model
  switch (another model, maybe another dimension) or a large change loads everything again.
- The copy is a snapshot replaced whole, never changed in place: a search computes on the one it
  took. One refresh runs at a time; a search that finds a refresh running uses the snapshot in
  hand (at most the vectors of that one refresh behind), or sqlite-vec if there is none yet.
- A vector the snapshot holds but no chunk uses any more (removed after the snapshot) maps to no
  chunk and is dropped when ids become chunks, so a stale snapshot never answers wrongly.

Above `max_bytes` (`[search] vector_memory_mb`) the copy is not kept and the store's own KNN answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import numpy as np

from groove.logs import get_logger

log = get_logger(__name__)

# New vectors past which the whole set is read again instead of by id (a bulk load).
RELOAD_OVER = 5_000


class VectorSource(Protocol):
    """What the copy reads from a store, on one of its readers."""

    async def vector_stamp(self) -> tuple[Any, ...]:
        """(model, dimension, highest vector id, vectors ever removed): what the copy must match."""

    async def vector_ids_upto(self, max_id: int) -> np.ndarray:
        """The ids of the stored vectors up to `max_id`, ascending (int64)."""

    async def count_vectors_after(self, max_id: int) -> int: ...

    async def vectors_after(self, max_id: int) -> list[tuple[int, bytes]]:
        """(id, float32 bytes) of the vectors past `max_id`."""


@dataclass(frozen=True)
class Snapshot:
    """The vectors as of one stamp: ids ascending, their rows, and each row's squared norm.

    The arrays may be views of the first rows of larger buffers (`_Buffers`): rows past them
    are filled by later snapshots and never read through this one."""

    stamp: tuple[Any, ...]
    ids: np.ndarray  # int64, ascending
    matrix: np.ndarray  # float32, (len(ids), dimension)
    norms2: np.ndarray  # float32, |row|^2

    @property
    def max_id(self) -> int:
        return int(self.ids[-1]) if len(self.ids) else 0

    def rows_of(self, emb_ids: Sequence[int]) -> np.ndarray | None:
        """Row indexes of these vector ids; None when one of them is not in this snapshot."""
        want = np.asarray(emb_ids, dtype=np.int64)
        rows = np.searchsorted(self.ids, want)
        if len(want) and (rows.max() >= len(self.ids) or not np.array_equal(self.ids[rows], want)):
            return None
        return rows

    def nearest(self, query: np.ndarray, k: int, rows: np.ndarray | None = None) -> list[tuple[int, float]]:
        """(vector id, L2 distance) of the `k` nearest rows (of `rows`, when given), nearest first;
        ties by id, as sqlite-vec orders its scan."""
        return self.nearest_many([query], [k], rows)[0]

    def nearest_many(
        self, queries: Sequence[np.ndarray], ks: Sequence[int], rows: np.ndarray | None = None
    ) -> list[list[tuple[int, float]]]:
        """`nearest` for several queries in one pass over the matrix (a search's raw and language-centred
        query, decision 0019): each query's `k` nearest, in the order of `queries`."""
        m, n2, ids = (
            (self.matrix, self.norms2, self.ids)
            if rows is None
            else (self.matrix[rows], self.norms2[rows], self.ids[rows])
        )
        if not len(ids) or not len(queries):
            return [[] for _ in queries]
        qs = np.asarray(np.stack([np.asarray(q, dtype=np.float32) for q in queries]), dtype=np.float32)
        # |m - q|^2 = |m|^2 + |q|^2 - 2 m.q: one product (every query a column, the matrix read once) picks
        # each query's k nearest (a few extra rows for float rounding at the cut); their distances are then
        # computed directly, as sqlite-vec does, since the expansion loses digits near 0. einsum, not `@`:
        # numpy's BLAS runs the product on two threads whose workers then spin for ~100 ms of CPU after each
        # call, taken from the full-text legs and the query embedding (decision 0012).
        products = np.einsum("ij,kj->ik", m, qs)
        out: list[list[tuple[int, float]]] = []
        for j, (q, k) in enumerate(zip(qs, ks, strict=True)):
            if k <= 0:
                out.append([])
                continue
            d2 = n2 + np.einsum("i,i->", q, q) - 2.0 * products[:, j]
            take = min(len(ids), k + 8)
            head = np.argpartition(d2, take - 1)[:take] if take < len(ids) else np.arange(len(ids))
            diff = m[head] - q
            dist = np.sqrt(np.einsum("ij,ij->i", diff, diff))
            order = np.lexsort((ids[head], dist))[:k]
            out.append([(int(ids[head[i]]), float(dist[i])) for i in order])
        return out

    def vectors_of(self, emb_ids: Sequence[int]) -> dict[int, np.ndarray] | None:
        """The rows of these vector ids (copies), by id; None when one of them is not in this snapshot."""
        want = sorted(set(emb_ids))
        rows = self.rows_of(want)
        if rows is None:
            return None
        got = self.matrix[rows]
        return {e: got[i] for i, e in enumerate(want)}


class _Buffers:
    """Growable arrays behind the snapshots: appending writes past every snapshot's rows."""

    def __init__(self, ids: np.ndarray, matrix: np.ndarray, n: int | None = None):
        """From arrays holding `n` rows (all, by default); arrays without room to grow are
        copied into ones with an eighth more."""
        self.n = len(ids) if n is None else n
        if len(ids) > self.n:
            self.ids, self.matrix = ids, matrix
        else:
            cap = capacity(self.n)
            self.ids = np.empty(cap, dtype=np.int64)
            self.matrix = np.empty((cap, matrix.shape[1]), dtype=np.float32)
            self.ids[: self.n], self.matrix[: self.n] = ids[: self.n], matrix[: self.n]
        self.norms2 = np.empty(len(self.ids), dtype=np.float32)
        self.norms2[: self.n] = np.einsum("ij,ij->i", self.matrix[: self.n], self.matrix[: self.n])

    def append(self, ids: np.ndarray, rows: np.ndarray) -> bool:
        """Add rows past the current ones; False when they do not fit (the caller rebuilds)."""
        end = self.n + len(ids)
        if end > len(self.ids):
            return False
        self.ids[self.n : end], self.matrix[self.n : end] = ids, rows
        self.norms2[self.n : end] = np.einsum("ij,ij->i", rows, rows)
        self.n = end
        return True

    def snapshot(self, stamp: tuple[Any, ...]) -> Snapshot:
        return Snapshot(stamp, self.ids[: self.n], self.matrix[: self.n], self.norms2[: self.n])


def capacity(n: int) -> int:
    return max(16, n + n // 8 + 1)


def _sorted(ids: np.ndarray, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(ids) < 2 or bool(np.all(ids[1:] > ids[:-1])):
        return ids, matrix
    order = np.argsort(ids, kind="stable")
    return ids[order], matrix[order]


def _decode(rows: Sequence[tuple[int, bytes]], dimension: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dimension)
    return ids, matrix


def _dimension_of(stamp: tuple[Any, ...]) -> int:
    return int(stamp[1] or 0)


def read_all(
    stamp: tuple[Any, ...], count: int, batches: Any, max_bytes: int
) -> tuple[tuple[Any, ...], _Buffers | int]:
    """Every vector a loader streams (`batches` of (id, bytes) rows), into the buffers' own arrays (no second
    copy): (stamp, buffers), or (stamp, count) when over budget."""
    dim = _dimension_of(stamp)
    if count * dim * 4 > max_bytes:
        return stamp, count
    ids = np.empty(capacity(count), dtype=np.int64)
    matrix = np.empty((len(ids), dim), dtype=np.float32)
    n = 0
    for rows in batches:
        if n + len(rows) >= len(ids):  # vectors without an `embeddings` row (doctor names them)
            ids = np.resize(ids, capacity(n + len(rows)))
            matrix = np.resize(matrix, (len(ids), dim))
        ids[n : n + len(rows)], matrix[n : n + len(rows)] = _decode(rows, dim)
        n += len(rows)
    ids[:n], matrix[:n] = _sorted(ids[:n], matrix[:n])
    return stamp, _Buffers(ids, matrix, n)


class VectorMatrix:
    """The in-memory copy for one index, shared by every reader of a process. `load_all(max_bytes)` reads every
    vector at once (in a worker thread): the store's `read_all` over its own connection."""

    def __init__(self, load_all: Callable[[int], tuple[tuple[Any, ...], _Buffers | int]], max_bytes: int):
        self.load_all = load_all
        self.max_bytes = max_bytes
        self._snapshot: Snapshot | None = None
        self._buffers: _Buffers | None = None
        self._lock = anyio.Lock()
        self._over_budget: tuple[Any, ...] | None = None  # the stamp found too large (logged once)
        self._last_error: str | None = None

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    async def current(self, source: VectorSource) -> Snapshot | None:
        """The snapshot for the index as `source` sees it now, refreshed first if the index moved;
        None when the store's own KNN should answer (over budget, disabled, or the first load running)."""
        if self.max_bytes <= 0:
            return None
        stamp = tuple(await source.vector_stamp())
        snap = self._snapshot
        if snap is not None and snap.stamp == stamp:
            return snap
        if self._over_budget == stamp:
            return None
        if self._lock.locked():
            return snap if snap is not None and snap.stamp[:2] == stamp[:2] else None
        async with self._lock:
            snap = self._snapshot
            if snap is None or snap.stamp != stamp:
                snap = self._snapshot = await self._refresh(source, snap, stamp)
        return snap

    async def _refresh(self, source: VectorSource, snap: Snapshot | None, stamp: tuple[Any, ...]) -> Snapshot | None:
        _model, _dimension, max_id, removed = stamp
        if snap is None or self._buffers is None or snap.stamp[:2] != stamp[:2]:
            return await self._load_all()
        if snap.stamp[3] != removed:
            kept = await source.vector_ids_upto(snap.max_id)
            mask = np.isin(snap.ids, kept, assume_unique=True)
            self._buffers = await anyio.to_thread.run_sync(_Buffers, snap.ids[mask], snap.matrix[mask])
        if (max_id or 0) > snap.max_id:
            added = await source.count_vectors_after(snap.max_id)
            if added > RELOAD_OVER or not self._fits(self._buffers.n + added, stamp):
                return await self._load_all()
            new_ids, new_rows = _sorted(*_decode(await source.vectors_after(snap.max_id), snap.matrix.shape[1]))
            if not self._buffers.append(new_ids, new_rows):
                old = self._buffers.snapshot(stamp)
                self._buffers = await anyio.to_thread.run_sync(
                    _Buffers, np.concatenate([old.ids, new_ids]), np.concatenate([old.matrix, new_rows])
                )
        return self._buffers.snapshot(stamp)

    async def _load_all(self) -> Snapshot | None:
        stamp, got = await anyio.to_thread.run_sync(self.load_all, self.max_bytes)
        if isinstance(got, int):
            self._fits(got, stamp)
            self._buffers = None
            return None
        self._buffers = got
        log.info("vectors_in_memory", vectors=got.n, mb=round(got.matrix.nbytes / 2**20, 1))
        return got.snapshot(stamp)

    def _fits(self, count: int, stamp: tuple[Any, ...]) -> bool:
        need = count * _dimension_of(stamp) * 4
        if need <= self.max_bytes:
            return True
        if self._over_budget is None or self._over_budget[:2] != stamp[:2]:
            log.info(
                "vectors_not_in_memory",
                vectors=count,
                need_mb=round(need / 2**20, 1),
                vector_memory_mb=round(self.max_bytes / 2**20, 1),
                message="the store's own KNN answers; raise [search] vector_memory_mb to keep them in memory",
            )
        self._over_budget = stamp
        return False

    async def usable(self, source: VectorSource) -> Snapshot | None:
        """`current`, or None (the store's KNN answers) when bringing the copy up to date failed: a
        search never fails because of its in-memory copy. Each distinct failure is logged once."""
        try:
            return await self.current(source)
        except Exception as exc:  # noqa: BLE001 - the store's own scan is the fallback
            if repr(exc) != self._last_error:
                self._last_error = repr(exc)
                log.warning("vectors_in_memory_failed", error=repr(exc), message="the store's own KNN answers")
            return None

    async def nearest(self, source: VectorSource, query: np.ndarray, k: int) -> list[tuple[int, float]] | None:
        """(vector id, L2 distance) of the `k` nearest vectors; None when the store's KNN should answer."""
        snap = await self.usable(source)
        if snap is None:
            return None
        return await anyio.to_thread.run_sync(snap.nearest, query, k)
