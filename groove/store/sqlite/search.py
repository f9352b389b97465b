"""The SQLite store's search reads: the full-text legs over FTS5, the vector leg, and rows by id.

Full text: one statement per leg over one of three FTS5 tables (trigram over the folded text: the
seeds' phrases; CJK bigrams; stemmed words: decisions 0006, 0014, 0018), the leg's terms OR-ed
into a MATCH expression, ranked by bm25 with column weights heading / context / content.
Vector: sqlite-vec KNN (L2) over the stored embeddings, or the process's in-memory copy
(groove/store/memory.py, decision 0012), mapped back to every chunk that carries the vector; the leg
itself is groove/store/knn.py, the same code as the PostgreSQL store's.
With a filter, both run only over the allowed documents: FTS through a rowid restriction,
vectors through an exact distance scan of the allowed chunks (sqlite-vec's KNN is itself a
brute-force scan, so this is never slower than an unfiltered query and always returns `limit`
hits when that many exist).

Which terms a leg keeps (the common ones left out, decision 0010) is decided above the store
(groove/search/fulltext.py) from the counts `doc_freq` gives; the vocabulary counts are cached
per connection while the index is unchanged.

Low-quality chunks (decision 0020): with `min_quality`, both retrievers leave out the chunks whose
stored score (`chunks.quality`, groove/corpus/quality.py) is under it, and a leg still returns
`limit` hits when that many others exist: each asks for its best rows and a few more, drops the
hidden ones, and only when fewer than `limit` are left asks again for as many more as the hidden
chunks hold; a filtered leg (allowed documents) keeps the floor in its SQL, and past sqlite-vec's
k limit the vector leg scans the chunks kept.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from typing import Any

import aiosqlite
import numpy as np

from groove.corpus import normalize
from groove.corpus.parsers.document import POSITIONS_KEY, position_of
from groove.store import knn
from groove.store.memory import VectorMatrix
from groove.store.protocols import DocumentFilter, TextKind, TextQuery, Weights, day_after
from groove.store.sqlite import reads
from groove.store.sqlite.connection import one
from groove.store.sqlite.schema import VECTOR_TABLE

MAX_KNN_K = 4096  # sqlite-vec's limit on k


def _allowed_clause(column: str, allowed_docs: Sequence[int] | None) -> tuple[str, tuple]:
    if allowed_docs is None:
        return "", ()
    return f" AND {column} IN (SELECT value FROM json_each(?))", (json.dumps(list(allowed_docs)),)


# The FTS5 table of each full-text index (store/sqlite/schema.py).
TABLES: dict[TextKind, str] = {"phrases": "fts_chunks", "bigrams": "fts_cjk", "words": "fts_words"}


def quote(term: str) -> str:
    """One FTS5 phrase: the term in double quotes, a double quote inside doubled."""
    return '"' + term.replace('"', '""') + '"'


def match_expression(query: TextQuery) -> str:
    """The FTS5 MATCH expression of a leg: its terms OR-ed (a prefix term with `*`), `NOT` its excluded phrases."""
    body = " OR ".join(quote(t) + ("*" if t in query.prefix else "") for t in query.terms)
    if query.excluded:
        return f"({body}) NOT ({' OR '.join(quote(p) for p in query.excluded)})"
    return body


async def text_scored(
    conn: aiosqlite.Connection,
    query: TextQuery,
    limit: int,
    weights: Weights = (2.0, 1.0, 1.0),
    allowed_docs: Sequence[int] | None = None,
    exclude: set[int] | None = None,
    min_quality: float | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, bm25) best first; bm25 is negative, lower is better (FTS5's convention). With
    `min_quality`, without the chunks that score under it."""
    if not query.terms:
        return []
    table = TABLES[query.kind]
    exclude = exclude or set()
    match_expr = match_expression(query)
    if allowed_docs is None:
        sql = (
            f"SELECT rowid, bm25({table}, ?, ?, ?) AS score FROM {table} WHERE {table} MATCH ?"
            " ORDER BY score, rowid LIMIT ?"
        )
        if min_quality:
            return await _fts_kept(conn, sql, (*weights, match_expr), limit, exclude, min_quality)
        args: tuple = (*weights, match_expr, limit + len(exclude))
    else:
        clause, extra = _allowed_clause("doc_id", allowed_docs)
        if min_quality:
            clause, extra = clause + " AND quality >= ?", (*extra, min_quality)
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


async def _fts_kept(
    conn: aiosqlite.Connection, sql: str, args: tuple, limit: int, exclude: set[int], min_quality: float
) -> list[tuple[int, float]]:
    """A full-text leg without the chunks under `min_quality`: the best rows and a few more, the hidden ones
    dropped (a set kept per connection while the index is unchanged: a NOT IN over the quality index would
    cost every statement about as much as its MATCH). `limit` kept rows among the best are the best kept rows,
    so a first round that finds them is exact; else a second asks for as many more rows as there are hidden
    chunks, which leaves `limit` kept ones whenever that many match."""
    hidden = await hidden_chunks(conn, min_quality)
    for extra in dict.fromkeys((min(len(hidden), max(limit, 16)), len(hidden))):
        want = limit + len(exclude) + extra
        got = list(await (await conn.execute(sql, (*args, want))).fetchall())
        rows = [(r[0], float(r[1])) for r in got if r[0] not in exclude and r[0] not in hidden]
        if len(rows) >= limit or len(got) < want:
            break
    return rows[:limit]


class _VocabCache:
    """Chunk counts of vocabulary terms, for one connection while the index is unchanged:
    `PRAGMA data_version` moves whenever another connection commits, `total_changes` when this
    one writes, and the cache is then dropped. The common terms, the costly ones to count, are
    the ones every query repeats."""

    MAX_TERMS = 50_000

    def __init__(self) -> None:
        self.version: tuple[int, int] | None = None
        self.n_chunks = 0
        self.doc: dict[tuple[str, str], int] = {}
        self.rows: dict[str, int] = {}
        self.hidden: dict[float, int] = {}  # min_quality -> vectors of the chunks under it
        self.hidden_ids: dict[float, frozenset[int]] = {}  # min_quality -> the chunks under it
        self.labels: SectionLabels | None = None  # (id, heading, context) of every chunk


_VOCAB: weakref.WeakKeyDictionary[Any, _VocabCache] = weakref.WeakKeyDictionary()


async def _vocab_cache(conn: aiosqlite.Connection) -> _VocabCache:
    cache = _VOCAB.get(conn)
    if cache is None:
        cache = _VOCAB[conn] = _VocabCache()
    # data_version moves with other connections' commits, total_changes with this one's own writes.
    version = (int(one(await (await conn.execute("PRAGMA data_version")).fetchone())[0]), conn.total_changes)
    if cache.version != version or len(cache.doc) > cache.MAX_TERMS:
        cache.version = version
        cache.doc = {}
        cache.rows = {}
        cache.hidden = {}
        cache.hidden_ids = {}
        cache.labels = None
        cache.n_chunks = int(one(await (await conn.execute("SELECT count(*) FROM chunks")).fetchone())[0])
    return cache


async def indexed_rows(conn: aiosqlite.Connection, kind: TextKind) -> int:
    """Rows of a full-text table that hold at least one term (its docsize is not all zeros:
    FTS5 writes one varint per column, x'000000' for three empty columns). One scan of the
    docsize table, about 6 ms at 100k chunks, cached until the index changes."""
    table = TABLES[kind]
    cache = await _vocab_cache(conn)
    if table not in cache.rows:
        cur = await conn.execute(f"SELECT count(*) FROM {table}_docsize WHERE sz != x'000000'")
        cache.rows[table] = int(one(await cur.fetchone())[0])
    return cache.rows[table]


async def _vocab_doc(
    conn: aiosqlite.Connection, cache: _VocabCache, table: str, terms: Sequence[str]
) -> dict[str, int]:
    """Chunks holding each vocabulary term (0 when absent), through the cache.

    The word table's vocabulary holds stems, which only FTS5's tokenizer computes, so a word
    is counted by matching it (one doclist walk, as fts5vocab's count is)."""
    missing = sorted({t for t in terms if (table, t) not in cache.doc})
    if missing and table == TABLES["words"]:
        union = " UNION ALL ".join(f"SELECT ?, count(*) FROM {table} WHERE {table} MATCH ?" for _ in missing)
        cur = await conn.execute(union, [x for t in missing for x in (t, quote(t))])
        for t, count in await cur.fetchall():
            cache.doc[(table, t)] = int(count)
    elif missing:
        cur = await conn.execute(
            f"SELECT term, doc FROM {table}_vocab WHERE term IN (SELECT value FROM json_each(?))",
            (json.dumps(missing),),
        )
        found = {term: doc for term, doc in await cur.fetchall()}
        for t in missing:
            cache.doc[(table, t)] = int(found.get(t, 0))
    return {t: cache.doc[(table, t)] for t in terms}


async def doc_freq(conn: aiosqlite.Connection, kind: TextKind, terms: Sequence[str]) -> tuple[dict[str, int], int]:
    """Per term, how many chunks contain it, and the number of chunks: the idf of the evidence weights.

    Trigram table: a phrase's count is bounded by its rarest trigram (fts5vocab counts
    trigrams), which is exact for a phrase of 3 characters and close above. Bigram table: a
    term of one character counts the chunks of its most frequent bigram (it matches as a prefix).
    Word table: exact (the chunks the word's stem is in).
    """
    table = TABLES[kind]
    cache = await _vocab_cache(conn)
    n = cache.n_chunks
    if not terms:
        return {}, n
    keys: dict[str, list[str]] = {}
    for t in terms:
        low = t.casefold()
        if table == "fts_chunks":
            keys[t] = [low[i : i + 3] for i in range(max(1, len(low) - 2))]
        else:
            keys[t] = [low]
    df = await _vocab_doc(conn, cache, table, [k for ks in keys.values() for k in ks])
    out: dict[str, int] = {}
    for t, ks in keys.items():
        if table == "fts_cjk" and len(t) == 1:
            key = (f"{table}*", t)
            if key not in cache.doc:
                cur = await conn.execute(
                    f"SELECT max(doc) FROM {table}_vocab WHERE term >= ? AND term < ?", (t, t + "\U0010ffff")
                )
                cache.doc[key] = int(one(await cur.fetchone())[0] or 0)
            out[t] = cache.doc[key]
        else:
            out[t] = min(df[k] for k in ks)
    return out, n


async def fetch_texts(conn: aiosqlite.Connection, ids: Sequence[int]) -> dict[int, str]:
    """heading, context and content of each chunk as one text, folded to one spelling as the
    full-text tables index it (decision 0018): the evidence looks for the compiled phrases in it."""
    if not ids:
        return {}
    cur = await conn.execute(
        "SELECT id, heading || char(10) || context || char(10) || content FROM chunks"
        " WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(ids)),),
    )
    return {cid: normalize.fold(text) for cid, text in await cur.fetchall()}


class SectionLabels(list[tuple[int, str, str]]):
    """(id, heading, context) of every chunk: a list a weak reference can follow (search/filters.py keeps what it
    picked from these labels only while the connection's cache still holds them)."""

    __slots__ = ("__weakref__",)


async def section_labels(conn: aiosqlite.Connection) -> SectionLabels:
    """(id, heading, context) of every chunk, read once per connection while the index is unchanged."""
    cache = await _vocab_cache(conn)
    if cache.labels is None:
        cur = await conn.execute("SELECT id, heading, context FROM chunks")
        cache.labels = SectionLabels((int(a), str(b), str(c)) for a, b, c in await cur.fetchall())
    return cache.labels


async def matching_ids(conn: aiosqlite.Connection, phrases: Sequence[str]) -> set[int]:
    """Every chunk containing any of the phrases: no ranking, no limit (the exclusion set)."""
    if not phrases:
        return set()
    expr = " OR ".join(quote(p) for p in phrases)
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


async def vector_scored(
    conn: aiosqlite.Connection,
    query: np.ndarray,
    limit: int,
    exclude: set[int] | None = None,
    allowed_docs: Sequence[int] | None = None,
    matrix: VectorMatrix | None = None,
    min_quality: float | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, L2 distance) nearest first; for unit vectors cosine = 1 - d^2 / 2 (`vector_legs` of one query)."""
    legs, _ = await vector_legs(conn, [(query, limit)], exclude, allowed_docs, matrix, min_quality, vectors=False)
    return legs[0]


async def vector_legs(
    conn: aiosqlite.Connection,
    queries: Sequence[tuple[np.ndarray, int]],
    exclude: set[int] | None = None,
    allowed_docs: Sequence[int] | None = None,
    matrix: VectorMatrix | None = None,
    min_quality: float | None = None,
    *,
    vectors: bool = True,
) -> tuple[list[list[tuple[int, float]]], dict[int, np.ndarray]]:
    """Each (query, limit)'s (chunk id, L2 distance) nearest first, and (with `vectors`) the vector of every
    chunk returned: groove/store/knn.py over this connection. With `matrix` (a long-running process's
    in-memory copy) one pass over the copy and the vectors from it; without it, or when it cannot answer,
    sqlite-vec's KNN (past its k limit under a quality floor, a scan of the chunks kept)."""
    return await knn.vector_legs(VectorRows(conn), matrix, queries, exclude, allowed_docs, min_quality, vectors=vectors)


async def hidden_vector_count(conn: aiosqlite.Connection, min_quality: float) -> int:
    """How many vectors the chunks scoring under `min_quality` hold: how many more the KNN asks for, so that
    `limit` kept chunks remain. A range of the quality index, counted once per connection while the index
    is unchanged."""
    cache = await _vocab_cache(conn)
    if min_quality not in cache.hidden:
        cur = await conn.execute(
            "SELECT count(DISTINCT embedding_id) FROM chunks WHERE quality < ? AND embedding_id IS NOT NULL",
            (min_quality,),
        )
        cache.hidden[min_quality] = int(one(await cur.fetchone())[0])
    return cache.hidden[min_quality]


async def hidden_chunks(conn: aiosqlite.Connection, min_quality: float) -> frozenset[int]:
    """The chunks scoring under `min_quality`, read once per connection while the index is unchanged (a range
    of the quality index: about 3 ms for 5,000 chunks)."""
    cache = await _vocab_cache(conn)
    if min_quality not in cache.hidden_ids:
        cur = await conn.execute("SELECT id FROM chunks WHERE quality < ?", (min_quality,))
        cache.hidden_ids[min_quality] = frozenset(r[0] for r in await cur.fetchall())
    return cache.hidden_ids[min_quality]


async def chunk_quality(conn: aiosqlite.Connection, ids: Sequence[int]) -> dict[int, float]:
    """The stored quality score of each chunk (explain)."""
    if not ids:
        return {}
    cur = await conn.execute(
        "SELECT id, quality FROM chunks WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(list(ids)),)
    )
    return {int(a): float(b) for a, b in await cur.fetchall()}


async def low_quality_count(conn: aiosqlite.Connection, min_quality: float) -> int:
    """How many chunks of the index score under `min_quality` (explain: what the filter hides)."""
    cur = await conn.execute("SELECT count(*) FROM chunks WHERE quality < ?", (min_quality,))
    return int(one(await cur.fetchone())[0])


_HIT_SQL = (
    "SELECT c.id, c.doc_id, d.path, d.title, c.heading, c.level, c.context, c.content, d.tags, d.date,"
    " c.start_line, c.end_line, c.ordinal, c.token_count, json_extract(d.frontmatter, '$.' || ?)"
    " FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id IN (SELECT value FROM json_each(?))"
)


async def fetch_hits(conn: aiosqlite.Connection, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Each chunk's row as a search hit carries it (`groove.search.hits.Hit`'s fields but the score)."""
    if not ids:
        return {}
    cur = await conn.execute(_HIT_SQL, (POSITIONS_KEY, json.dumps(list(ids))))
    out: dict[int, dict[str, Any]] = {}
    for r in await cur.fetchall():
        out[r[0]] = dict(
            chunk_id=r[0],
            doc_id=r[1],
            path=r[2],
            title=r[3],
            heading=r[4],
            level=r[5],
            context=r[6],
            content=r[7],
            tags=json.loads(r[8]),
            date=r[9],
            start_line=r[10],
            end_line=r[11],
            ordinal=r[12],
            token_count=r[13],
            position=position_of(_json(r[14]), r[10]),
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


async def calibration_state(conn: aiosqlite.Connection) -> tuple[str, int, str | None]:
    """The vector set's model, its size (vectors ever added minus those removed) and the off_topic
    calibration stored in meta (JSON, or None): one O(1) statement, read by every search that has a
    query vector to know whether its calibration still serves (search/offtopic.py)."""
    cur = await conn.execute(
        "SELECT (SELECT value FROM meta WHERE key = 'model'), (SELECT max(id) FROM embeddings),"
        " (SELECT value FROM meta WHERE key = 'vectors_removed'),"
        " (SELECT value FROM meta WHERE key = 'off_topic_calibration')"
    )
    model, max_id, removed, stored = one(await cur.fetchone())
    return str(model or ""), max(0, int(max_id or 0) - int(removed or 0)), stored


async def calibration_passages(
    conn: aiosqlite.Connection, k: int, min_quality: float | None = None
) -> list[tuple[int, int, str]]:
    """(chunk id, doc id, content) of up to `k` embedded chunks (with `min_quality`, of those scoring at
    least that: the ones a search shows), a fixed pseudo-random sample (ordered by a multiplicative hash
    of the id), for the off_topic calibration and the language centres."""
    kept, floor = (" AND quality >= ?", (min_quality,)) if min_quality else ("", ())
    cur = await conn.execute(
        "SELECT id, doc_id, content FROM chunks WHERE embedding_id IS NOT NULL AND length(content) >= 20"
        + kept
        + " ORDER BY (id * 2654435761) % 4294967291, id LIMIT ?",
        (*floor, k),
    )
    return [(int(a), int(b), str(c)) for a, b, c in await cur.fetchall()]


async def chunk_docs(conn: aiosqlite.Connection, ids: Sequence[int]) -> dict[int, int]:
    """The note (doc id) of each chunk id."""
    if not ids:
        return {}
    cur = await conn.execute(
        "SELECT id, doc_id FROM chunks WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(list(ids)),)
    )
    return {int(a): int(b) for a, b in await cur.fetchall()}


# (model, dimension, highest vector id, removals): what the in-memory copy must match (store/memory.py).
STAMP_SQL = (
    "SELECT (SELECT value FROM meta WHERE key = 'model'), (SELECT value FROM meta WHERE key = 'dimension'),"
    " (SELECT max(id) FROM embeddings), (SELECT value FROM meta WHERE key = 'vectors_removed')"
)


class VectorRows:
    """The stored vectors on one SQLite connection: the in-memory copy's `groove.store.memory.VectorSource` and
    the vector leg's `groove.store.knn.StoredVectors` (sqlite-vec's KNN, capped at its k limit)."""

    def __init__(self, conn: aiosqlite.Connection):
        self.conn = conn

    @property
    def knn_limit(self) -> int | None:
        return MAX_KNN_K

    async def nearest_vectors(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        return await nearest_embeddings(self.conn, query, k)

    async def scan_chunks(
        self, query: np.ndarray, allowed_docs: Sequence[int] | None, min_quality: float | None, k: int
    ) -> list[tuple[int, float]]:
        clause, params = _allowed_clause("c.doc_id", allowed_docs)
        if min_quality:
            clause, params = clause + " AND c.quality >= ?", (*params, min_quality)
        cur = await self.conn.execute(
            f"SELECT c.id, vec_distance_l2(v.embedding, ?) AS d FROM chunks c JOIN {VECTOR_TABLE} v"
            f" ON v.rowid = c.embedding_id WHERE c.embedding_id IS NOT NULL{clause} ORDER BY d, c.id LIMIT ?",
            (np.asarray(query, dtype=np.float32).tobytes(), *params, k),
        )
        return [(int(r[0]), float(r[1])) for r in await cur.fetchall()]

    async def chunk_vectors(self, allowed_docs: Sequence[int], min_quality: float | None) -> list[tuple[int, int]]:
        clause, params = _allowed_clause("doc_id", allowed_docs)
        return await self._pairs(clause, params, min_quality)

    async def chunks_of_vectors(self, emb_ids: Sequence[int], min_quality: float | None) -> list[tuple[int, int]]:
        return await self._pairs(
            " AND embedding_id IN (SELECT value FROM json_each(?))", (json.dumps(list(emb_ids)),), min_quality
        )

    async def _pairs(self, clause: str, params: tuple, min_quality: float | None) -> list[tuple[int, int]]:
        if min_quality:
            clause, params = clause + " AND quality >= ?", (*params, min_quality)
        cur = await self.conn.execute(
            f"SELECT id, embedding_id FROM chunks WHERE embedding_id IS NOT NULL{clause}", params
        )
        return [(int(cid), int(e)) for cid, e in await cur.fetchall()]

    async def hidden_vector_count(self, min_quality: float) -> int:
        return await hidden_vector_count(self.conn, min_quality)

    async def fetch_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        return await fetch_vectors(self.conn, chunk_ids)

    async def vector_stamp(self) -> tuple[Any, ...]:
        return tuple(one(await (await self.conn.execute(STAMP_SQL)).fetchone()))

    async def vector_ids_upto(self, max_id: int) -> np.ndarray:
        cur = await self.conn.execute("SELECT id FROM embeddings WHERE id <= ? ORDER BY id", (max_id,))
        return np.fromiter((r[0] for r in await cur.fetchall()), dtype=np.int64)

    async def count_vectors_after(self, max_id: int) -> int:
        cur = await self.conn.execute("SELECT count(*) FROM embeddings WHERE id > ?", (max_id,))
        return int(one(await cur.fetchone())[0])

    async def vectors_after(self, max_id: int) -> list[tuple[int, bytes]]:
        cur = await self.conn.execute(
            f"SELECT rowid, embedding FROM {VECTOR_TABLE} WHERE rowid IN (SELECT id FROM embeddings WHERE id > ?)",
            (max_id,),
        )
        return [(int(r[0]), bytes(r[1])) for r in await cur.fetchall()]


async def documents_matching(conn: aiosqlite.Connection, where: DocumentFilter) -> list[tuple[Any, ...]]:
    """(id, path[, frontmatter dict]) of the documents with these tags and dates, by id.

    Dates are stored as 'YYYY-MM-DD' or a full ISO datetime, so "the day is on or after F" is
    `date >= F` and "on or before T" is `date < T + 1 day`: range comparisons that use the index,
    and NULL (undated) never matches."""
    clauses: list[str] = []
    args: list[Any] = []
    if where.tags_any:
        clauses.append("id IN (SELECT doc_id FROM doc_tags WHERE tag IN (SELECT value FROM json_each(?)))")
        args.append(json.dumps(list(where.tags_any), ensure_ascii=False))
    for tag in dict.fromkeys(where.tags_all):
        clauses.append("id IN (SELECT doc_id FROM doc_tags WHERE tag = ?)")
        args.append(tag)
    if where.date_from:
        clauses.append("date >= ?")
        args.append(where.date_from)
    if where.date_to:
        after = day_after(where.date_to)
        clauses.append("date < ?" if after else "date IS NOT NULL")
        args += [after] if after else []
    columns = "id, path" + (", frontmatter" if where.with_frontmatter else "")
    cur = await conn.execute(f"SELECT {columns} FROM documents WHERE {' AND '.join(clauses) or '1'} ORDER BY id", args)
    rows = await cur.fetchall()
    if where.with_frontmatter:
        return [(r[0], r[1], json.loads(r[2])) for r in rows]
    return [(r[0], r[1]) for r in rows]


class SqliteSearchReads:
    """`groove.store.protocols.SearchReads` on one SQLite connection: the functions above; with
    `matrix`, KNN on the process's in-memory copy of the vectors (store/memory.py); with `min_quality`,
    both retrievers see the index without the chunks that score under it (decision 0020)."""

    def __init__(
        self, conn: aiosqlite.Connection, matrix: VectorMatrix | None = None, min_quality: float | None = None
    ):
        self.conn = conn
        self.matrix = matrix
        self.min_quality = min_quality or None  # 0 hides nothing

    async def documents_matching(self, where: DocumentFilter) -> list[tuple[Any, ...]]:
        return await documents_matching(self.conn, where)

    async def tag_names(self) -> list[str]:
        cur = await self.conn.execute("SELECT DISTINCT tag FROM doc_tags ORDER BY tag")
        return [r[0] for r in await cur.fetchall()]

    async def text_scored(
        self,
        query: TextQuery,
        limit: int,
        weights: Weights = (2.0, 1.0, 1.0),
        allowed_docs: Sequence[int] | None = None,
        exclude: set[int] | None = None,
    ) -> list[tuple[int, float]]:
        return await text_scored(self.conn, query, limit, weights, allowed_docs, exclude, self.min_quality)

    async def doc_freq(self, kind: TextKind, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        return await doc_freq(self.conn, kind, terms)

    async def indexed_rows(self, kind: TextKind) -> int:
        return await indexed_rows(self.conn, kind)

    async def sent_expression(self, query: TextQuery) -> str:
        return match_expression(query)

    async def fetch_texts(self, ids: Sequence[int]) -> dict[int, str]:
        return await fetch_texts(self.conn, ids)

    async def matching_ids(self, phrases: Sequence[str]) -> set[int]:
        return await matching_ids(self.conn, phrases)

    async def section_labels(self) -> SectionLabels:
        return await section_labels(self.conn)

    async def vector_scored(
        self, query: np.ndarray, limit: int, exclude: set[int] | None = None, allowed_docs: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        return await vector_scored(self.conn, query, limit, exclude, allowed_docs, self.matrix, self.min_quality)

    async def vector_legs(
        self,
        queries: Sequence[tuple[np.ndarray, int]],
        exclude: set[int] | None = None,
        allowed_docs: Sequence[int] | None = None,
    ) -> tuple[list[list[tuple[int, float]]], dict[int, np.ndarray]]:
        return await vector_legs(self.conn, queries, exclude, allowed_docs, self.matrix, self.min_quality)

    async def fetch_hits(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        return await fetch_hits(self.conn, ids)

    async def fetch_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        return await fetch_vectors(self.conn, chunk_ids)

    async def fetch_doc_chunks(self, doc_ids: Sequence[int]) -> dict[int, list[tuple[Any, ...]]]:
        return await fetch_doc_chunks(self.conn, doc_ids)

    async def pending_count(self) -> int:
        return await reads.pending_count(self.conn)

    async def calibration_state(self) -> tuple[str, int, str | None]:
        return await calibration_state(self.conn)

    async def calibration_passages(self, k: int) -> list[tuple[int, int, str]]:
        return await calibration_passages(self.conn, k, self.min_quality)

    async def chunk_docs(self, ids: Sequence[int]) -> dict[int, int]:
        return await chunk_docs(self.conn, ids)

    async def chunk_quality(self, ids: Sequence[int]) -> dict[int, float]:
        return await chunk_quality(self.conn, ids)

    async def low_quality_count(self, min_quality: float) -> int:
        return await low_quality_count(self.conn, min_quality)
