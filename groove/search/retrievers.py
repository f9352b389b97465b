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

from groove.corpus.parsers.document import POSITIONS_KEY, position_of
from groove.search import filters as filters_mod
from groove.search.hits import Hit
from groove.store import reads
from groove.store.interface import VECTOR_TABLE

MAX_KNN_K = 4096  # sqlite-vec's limit on k


def _allowed_clause(column: str, allowed_docs: Sequence[int] | None) -> tuple[str, tuple]:
    if allowed_docs is None:
        return "", ()
    return f" AND {column} IN (SELECT value FROM json_each(?))", (json.dumps(list(allowed_docs)),)


FTS_TABLES = ("fts_chunks", "fts_cjk")  # trigram (the seed compiler's phrases), CJK bigrams


async def fts_search(conn: aiosqlite.Connection, match_expr: str, limit: int, **kw: Any) -> list[int]:
    """Chunk ids ranked by bm25 (best first): `fts_scored` without the scores."""
    return [cid for cid, _ in await fts_scored(conn, match_expr, limit, **kw)]


async def fts_scored(
    conn: aiosqlite.Connection,
    match_expr: str,
    limit: int,
    weights: tuple[float, float, float] = (2.0, 1.0, 1.0),
    allowed_docs: Sequence[int] | None = None,
    table: str = "fts_chunks",
    exclude: set[int] | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, bm25) best first; bm25 is negative, lower is better (FTS5's convention)."""
    if table not in FTS_TABLES:
        raise ValueError(f"unknown full-text table {table!r}")
    exclude = exclude or set()
    if allowed_docs is None:
        sql = (
            f"SELECT rowid, bm25({table}, ?, ?, ?) AS score FROM {table} WHERE {table} MATCH ?"
            " ORDER BY score, rowid LIMIT ?"
        )
        args: tuple = (*weights, match_expr, limit + len(exclude))
    else:
        clause, extra = _allowed_clause("doc_id", allowed_docs)
        sql = (
            f"SELECT rowid, bm25({table}, ?, ?, ?) AS score FROM {table} WHERE {table} MATCH ?"
            # `+rowid`, not `rowid`: a bare rowid constraint lets SQLite plan the MATCH once per
            # allowed id (bm25 and the phrase scan re-run each time: 12.6 s at 100k chunks); the
            # unary + keeps it a filter on the one MATCH's rows (decision 0009).
            f" AND +rowid IN (SELECT id FROM chunks WHERE 1{clause})"
            " ORDER BY score, rowid LIMIT ?"
        )
        args = (*weights, match_expr, *extra, limit + len(exclude))
    cur = await conn.execute(sql, args)
    rows = [(r[0], float(r[1])) for r in await cur.fetchall() if r[0] not in exclude]
    return rows[:limit]


async def term_doc_freq(conn: aiosqlite.Connection, table: str, terms: Sequence[str]) -> tuple[dict[str, int], int]:
    """Per term, how many chunks contain it, and the number of chunks: the idf of the evidence weights.

    Trigram table: a phrase's count is bounded by its rarest trigram (fts5vocab counts
    trigrams), which is exact for a phrase of 3 characters and close above. Bigram table: a
    term of one character counts the chunks of its most frequent bigram (it matches as a prefix).
    """
    if table not in FTS_TABLES:
        raise ValueError(f"unknown full-text table {table!r}")
    n = int((await (await conn.execute("SELECT count(*) FROM chunks")).fetchone())[0])
    if not terms:
        return {}, n
    keys: dict[str, list[str]] = {}
    for t in terms:
        low = t.casefold()
        if table == "fts_chunks":
            keys[t] = [low[i : i + 3] for i in range(max(1, len(low) - 2))]
        else:
            keys[t] = [low]
    wanted = sorted({k for ks in keys.values() for k in ks})
    cur = await conn.execute(
        f"SELECT term, doc FROM {table}_vocab WHERE term IN (SELECT value FROM json_each(?))", (json.dumps(wanted),)
    )
    df = dict(await cur.fetchall())
    out: dict[str, int] = {}
    for t, ks in keys.items():
        if table == "fts_cjk" and len(t) == 1:
            cur = await conn.execute(
                f"SELECT max(doc) FROM {table}_vocab WHERE term >= ? AND term < ?", (t, t + "\U0010ffff")
            )
            out[t] = int((await cur.fetchone())[0] or 0)
        else:
            out[t] = min(int(df.get(k, 0)) for k in ks)
    return out, n


async def fetch_texts(conn: aiosqlite.Connection, ids: Sequence[int]) -> dict[int, str]:
    """heading, context and content of each chunk as one text (what the full-text tables index)."""
    if not ids:
        return {}
    cur = await conn.execute(
        "SELECT id, heading || char(10) || context || char(10) || content FROM chunks"
        " WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(ids)),),
    )
    return dict(await cur.fetchall())


async def matching_ids(conn: aiosqlite.Connection, expr: str) -> set[int]:
    """Every chunk id an expression matches: no ranking, no limit (the exclusion set)."""
    cur = await conn.execute("SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH ?", (expr,))
    return {r[0] for r in await cur.fetchall()}


async def nearest_embeddings(conn: aiosqlite.Connection, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """sqlite-vec KNN: (embedding id, L2 distance) of the `k` stored vectors nearest `query`, nearest first.
    Written `AND k = ?`, not LIMIT (SQLite 3.40 rejects LIMIT on vec0); k capped at sqlite-vec's 4096."""
    cur = await conn.execute(
        f"SELECT rowid, distance FROM {VECTOR_TABLE} WHERE embedding MATCH ? AND k = ? ORDER BY distance",
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
    return [cid for cid, _ in await vector_scored(conn, query, limit, exclude, allowed_docs)]


async def vector_scored(
    conn: aiosqlite.Connection,
    query: np.ndarray,
    limit: int,
    exclude: set[int] | None = None,
    allowed_docs: Sequence[int] | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, L2 distance) nearest first; for unit vectors cosine = 1 - d^2 / 2."""
    blob = np.asarray(query, dtype=np.float32).tobytes()
    exclude = exclude or set()
    if allowed_docs is not None:
        clause, extra = _allowed_clause("c.doc_id", allowed_docs)
        cur = await conn.execute(
            f"SELECT c.id, vec_distance_l2(v.embedding, ?) AS d FROM chunks c JOIN {VECTOR_TABLE} v ON v.rowid = c.embedding_id"
            f" WHERE c.embedding_id IS NOT NULL{clause}"
            " ORDER BY d, c.id LIMIT ?",
            (blob, *extra, limit + len(exclude)),
        )
        rows = [(r[0], float(r[1])) for r in await cur.fetchall()]
        return [r for r in rows if r[0] not in exclude][:limit]
    nearest = await nearest_embeddings(conn, query, limit + len(exclude))
    if not nearest:
        return []
    rank = {emb_id: (i, float(d)) for i, (emb_id, d) in enumerate(nearest)}
    cur = await conn.execute(
        "SELECT id, embedding_id FROM chunks WHERE embedding_id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(rank)),),
    )
    out = sorted((rank[e][0], cid, rank[e][1]) for cid, e in await cur.fetchall() if cid not in exclude)
    return [(cid, d) for _, cid, d in out][:limit]


_HIT_SQL = (
    "SELECT c.id, c.doc_id, d.path, d.title, c.heading, c.level, c.context, c.content, d.tags, d.date,"
    " c.start_line, c.end_line, c.ordinal, c.token_count, json_extract(d.frontmatter, '$.' || ?)"
    " FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id IN (SELECT value FROM json_each(?))"
)


async def fetch_hits(conn: aiosqlite.Connection, ids: Sequence[int]) -> dict[int, Hit]:
    if not ids:
        return {}
    cur = await conn.execute(_HIT_SQL, (POSITIONS_KEY, json.dumps(list(ids))))
    out: dict[int, Hit] = {}
    for r in await cur.fetchall():
        out[r[0]] = Hit(
            chunk_id=r[0], doc_id=r[1], path=r[2], title=r[3], heading=r[4], level=r[5], context=r[6],
            content=r[7], tags=json.loads(r[8]), date=r[9], start_line=r[10], end_line=r[11], ordinal=r[12],
            token_count=r[13], score=0.0, position=position_of(_json(r[14]), r[10]),
        )
    return out


def _json(text: str | None) -> Any:
    """A document's stored positions (corpus/parsers/document.py); None when absent or unreadable."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


async def fetch_vectors(conn: aiosqlite.Connection, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """Stored vectors of the given chunks, fetched once per query (for MMR)."""
    if not chunk_ids:
        return {}
    cur = await conn.execute(
        f"SELECT c.id, v.embedding FROM chunks c JOIN {VECTOR_TABLE} v ON v.rowid = c.embedding_id"
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


class SqliteSearchReads:
    """`groove.store.interface.SearchReads` on one SQLite connection: the functions above."""

    def __init__(self, conn: aiosqlite.Connection):
        self.conn = conn

    async def allowed_documents(self, filters: Any) -> list[int] | None:
        return await filters_mod.allowed_documents(self.conn, filters)

    async def fts_scored(self, match_expr: str, limit: int, weights: tuple[float, float, float] = (2.0, 1.0, 1.0),
                         allowed_docs: Sequence[int] | None = None, table: str = "fts_chunks",
                         exclude: set[int] | None = None) -> list[tuple[int, float]]:
        return await fts_scored(self.conn, match_expr, limit, weights, allowed_docs, table, exclude)

    async def term_doc_freq(self, table: str, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        return await term_doc_freq(self.conn, table, terms)

    async def fetch_texts(self, ids: Sequence[int]) -> dict[int, str]:
        return await fetch_texts(self.conn, ids)

    async def matching_ids(self, expr: str) -> set[int]:
        return await matching_ids(self.conn, expr)

    async def vector_scored(self, query: np.ndarray, limit: int, exclude: set[int] | None = None,
                            allowed_docs: Sequence[int] | None = None) -> list[tuple[int, float]]:
        return await vector_scored(self.conn, query, limit, exclude, allowed_docs)

    async def fetch_hits(self, ids: Sequence[int]) -> dict[int, Hit]:
        return await fetch_hits(self.conn, ids)

    async def fetch_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        return await fetch_vectors(self.conn, chunk_ids)

    async def fetch_doc_chunks(self, doc_ids: Sequence[int]) -> dict[int, list[tuple[Any, ...]]]:
        return await fetch_doc_chunks(self.conn, doc_ids)

    async def pending_count(self) -> int:
        return await reads.pending_count(self.conn)
