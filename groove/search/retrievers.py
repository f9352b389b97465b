"""The two retrievers over the index, and the row fetch that turns ids into hits.

FTS: one statement over the union of the compiled phrases, ranked by bm25 with
column weights heading / context / content. Vector: sqlite-vec KNN (L2) over
the stored embeddings, mapped back to every chunk that carries the vector.
With a filter, both run only over the allowed documents: FTS through a rowid
restriction, vectors through an exact distance scan of the allowed chunks
(sqlite-vec's KNN is itself a brute-force scan, so this is never slower than
an unfiltered query and always returns `limit` hits when that many exist).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import aiosqlite
import numpy as np

from groove.search.hits import Hit

MAX_KNN_K = 4096  # sqlite-vec's limit on k


def _allowed_clause(column: str, allowed_docs: Sequence[int] | None) -> tuple[str, tuple]:
    if allowed_docs is None:
        return "", ()
    return f" AND {column} IN (SELECT value FROM json_each(?))", (json.dumps(list(allowed_docs)),)


async def fts_search(
    conn: aiosqlite.Connection,
    match_expr: str,
    limit: int,
    weights: tuple[float, float, float] = (2.0, 1.0, 1.0),
    allowed_docs: Sequence[int] | None = None,
) -> list[int]:
    """Chunk ids ranked by bm25 (best first)."""
    if allowed_docs is None:
        sql = (
            "SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH ?"
            " ORDER BY bm25(fts_chunks, ?, ?, ?), rowid LIMIT ?"
        )
        args: tuple = (match_expr, *weights, limit)
    else:
        clause, extra = _allowed_clause("doc_id", allowed_docs)
        sql = (
            "SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH ?"
            f" AND rowid IN (SELECT id FROM chunks WHERE 1{clause})"
            " ORDER BY bm25(fts_chunks, ?, ?, ?), rowid LIMIT ?"
        )
        args = (match_expr, *extra, *weights, limit)
    cur = await conn.execute(sql, args)
    return [r[0] for r in await cur.fetchall()]


async def matching_ids(conn: aiosqlite.Connection, expr: str) -> set[int]:
    """Every chunk id an expression matches: no ranking, no limit (the exclusion set)."""
    cur = await conn.execute("SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH ?", (expr,))
    return {r[0] for r in await cur.fetchall()}


async def nearest_embeddings(conn: aiosqlite.Connection, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """sqlite-vec KNN: (embedding id, L2 distance) of the `k` stored vectors nearest `query`, nearest first.
    Written `AND k = ?`, not LIMIT (SQLite 3.40 rejects LIMIT on vec0); k capped at sqlite-vec's 4096."""
    cur = await conn.execute(
        "SELECT rowid, distance FROM vec_embeddings WHERE embedding MATCH ? AND k = ? ORDER BY distance",
        (np.asarray(query, dtype=np.float32).tobytes(), min(MAX_KNN_K, k)),
    )
    return [(r[0], r[1]) for r in await cur.fetchall()]


async def vector_search(
    conn: aiosqlite.Connection,
    query: np.ndarray,
    limit: int,
    exclude: set[int] | None = None,
    allowed_docs: Sequence[int] | None = None,
) -> list[int]:
    """Chunk ids by L2 distance to the query (nearest first)."""
    blob = np.asarray(query, dtype=np.float32).tobytes()
    exclude = exclude or set()
    if allowed_docs is not None:
        clause, extra = _allowed_clause("c.doc_id", allowed_docs)
        cur = await conn.execute(
            "SELECT c.id FROM chunks c JOIN vec_embeddings v ON v.rowid = c.embedding_id"
            f" WHERE c.embedding_id IS NOT NULL{clause}"
            " ORDER BY vec_distance_l2(v.embedding, ?), c.id LIMIT ?",
            (*extra, blob, limit + len(exclude)),
        )
        ids = [r[0] for r in await cur.fetchall()]
        return [i for i in ids if i not in exclude][:limit]
    nearest = await nearest_embeddings(conn, query, limit + len(exclude))
    if not nearest:
        return []
    rank = {emb_id: i for i, (emb_id, _) in enumerate(nearest)}
    cur = await conn.execute(
        "SELECT id, embedding_id FROM chunks WHERE embedding_id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(rank)),),
    )
    rows = [(rank[e], cid) for cid, e in await cur.fetchall() if cid not in exclude]
    rows.sort()
    return [cid for _, cid in rows][:limit]


_HIT_SQL = (
    "SELECT c.id, c.doc_id, d.path, d.title, c.heading, c.level, c.context, c.content, d.tags, d.date,"
    " c.start_line, c.end_line, c.ordinal, c.token_count"
    " FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id IN (SELECT value FROM json_each(?))"
)


async def fetch_hits(conn: aiosqlite.Connection, ids: Sequence[int]) -> dict[int, Hit]:
    if not ids:
        return {}
    cur = await conn.execute(_HIT_SQL, (json.dumps(list(ids)),))
    out: dict[int, Hit] = {}
    for r in await cur.fetchall():
        out[r[0]] = Hit(
            chunk_id=r[0], doc_id=r[1], path=r[2], title=r[3], heading=r[4], level=r[5], context=r[6],
            content=r[7], tags=json.loads(r[8]), date=r[9], start_line=r[10], end_line=r[11], ordinal=r[12],
            token_count=r[13], score=0.0,
        )
    return out


async def fetch_vectors(conn: aiosqlite.Connection, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """Stored vectors of the given chunks, fetched once per query (for MMR)."""
    if not chunk_ids:
        return {}
    cur = await conn.execute(
        "SELECT c.id, v.embedding FROM chunks c JOIN vec_embeddings v ON v.rowid = c.embedding_id"
        " WHERE c.id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(chunk_ids)),),
    )
    return {cid: np.frombuffer(blob, dtype=np.float32) for cid, blob in await cur.fetchall()}


async def fetch_doc_chunks(conn: aiosqlite.Connection, doc_ids: Sequence[int]) -> dict[int, list[tuple[Any, ...]]]:
    """(ordinal, level, heading, content, start_line, end_line, token_count) per document, in order."""
    if not doc_ids:
        return {}
    cur = await conn.execute(
        "SELECT doc_id, ordinal, level, heading, content, start_line, end_line, token_count FROM chunks"
        " WHERE doc_id IN (SELECT value FROM json_each(?)) ORDER BY doc_id, ordinal",
        (json.dumps(list(doc_ids)),),
    )
    out: dict[int, list[tuple[Any, ...]]] = {}
    for r in await cur.fetchall():
        out.setdefault(r[0], []).append(r[1:])
    return out
