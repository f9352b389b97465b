"""The two retrievers over the index, and the row fetch that turns ids into hits.

FTS: one statement over the union of the compiled phrases, ranked by bm25 with
column weights heading / context / content. Vector: sqlite-vec KNN (L2) over
the stored embeddings, mapped back to every chunk that carries the vector.
With a filter, both run only over the allowed documents: FTS through a rowid
restriction, vectors through an exact distance scan of the allowed chunks
(sqlite-vec's KNN is itself a brute-force scan, so this is never slower than
an unfiltered query and always returns `limit` hits when that many exist).

Three full-text tables, one leg each: trigram (the seed compiler's phrases), CJK
bigrams, and words (stemmed; a query made only of words of alphabets written
with spaces searches it instead of the trigram table: decision 0014).

Common terms (decision 0010): from 5,000 chunks on, before a full-text leg runs,
each OR-ed term of its expression is looked up in the table's vocabulary and
the terms are kept rarest first, while a term's idf is at least a tenth of the
rarest's and the kept terms' matches add up to at most the number of chunks.
A term left out weighs little in bm25 (FTS5 clamps its idf to almost 0 past
half the table) but would make FTS5 walk and score most of the table.
The compiler's phrases are unchanged; only what this leg hands to FTS5 is.

Low-quality chunks (decision 0020): with `min_quality`, both retrievers leave out the chunks whose
stored score (`chunks.quality`, groove/corpus/quality.py) is under it, and a leg still returns
`limit` hits when that many others exist: each asks for its best rows and a few more, drops the
hidden ones, and only when fewer than `limit` are left asks again for as many more as the hidden
chunks hold; a filtered leg (allowed documents) keeps the floor in its SQL, and past sqlite-vec's
k limit the vector leg scans the chunks kept.
"""

from __future__ import annotations

import json
import math
import re
import weakref
from collections.abc import Sequence
from typing import Any

import aiosqlite
import numpy as np

from groove.corpus import normalize
from groove.corpus.parsers.document import POSITIONS_KEY, position_of
from groove.search import filters as filters_mod
from groove.search.compiler import quote_phrase
from groove.search.hits import Hit
from groove.store import reads
from groove.store.connection import one
from groove.store.interface import VECTOR_TABLE
from groove.store.schema import FTS_TABLES
from groove.store.vectors import VectorMatrix

MAX_KNN_K = 4096  # sqlite-vec's limit on k


def _allowed_clause(column: str, allowed_docs: Sequence[int] | None) -> tuple[str, tuple]:
    if allowed_docs is None:
        return "", ()
    return f" AND {column} IN (SELECT value FROM json_each(?))", (json.dumps(list(allowed_docs)),)


WORD_TABLE = "fts_words"


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
    min_quality: float | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, bm25) best first; bm25 is negative, lower is better (FTS5's convention). With
    `min_quality`, without the chunks that score under it."""
    if table not in FTS_TABLES:
        raise ValueError(f"unknown full-text table {table!r}")
    exclude = exclude or set()
    match_expr = await prune_common_terms(conn, table, match_expr)
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


# Common terms (decision 0010). A term is left out of a leg's MATCH when its bm25 idf is under
# MIN_WEIGHT_SHARE of the idf of the query's rarest matching term (FTS5's idf,
# ln((N - n + 0.5) / (n + 0.5)), clamped to 1e-6: a term in half the chunks or more weighs ~0), or
# when keeping it would make the kept terms' chunk counts add up to more than POSTINGS_SHARE of
# the chunks (a bound on the postings one leg walks and scores). Only from PRUNE_MIN_CHUNKS on:
# below it the worst leg costs tens of ms (the seeds: 47 ms for 32 phrases over 5,000 rows).
MIN_WEIGHT_SHARE = 0.1
POSTINGS_SHARE = 1.0
PRUNE_MIN_CHUNKS = 5_000
# An OR of quoted terms (`"a" OR "b"*`, FTS5's doubled-quote escaping inside), as the compiler
# and `cjk_query` write it; a trigram expression with exclusions is `(positives) NOT (negatives)`.
_TERM = r'"(?:[^"]|"")*"\*?'
_OR_TERMS = re.compile(rf"{_TERM}(?: OR {_TERM})*")
_QUOTED = re.compile(_TERM)


def split_or_terms(expr: str) -> tuple[list[str], str] | None:
    """The OR-ed terms of a full-text expression, each as written, and its `NOT (...)` tail
    (empty when none); None for any other shape, which is then run as it is."""
    tail = ""
    body = expr
    if expr.startswith("(") and ") NOT (" in expr:
        head, _, rest = expr[1:].partition(") NOT (")
        if not rest.endswith(")") or not _OR_TERMS.fullmatch(rest[:-1]):
            return None
        body, tail = head, f" NOT ({rest}"
    if not _OR_TERMS.fullmatch(body):
        return None
    return _QUOTED.findall(body), tail


def _unquote(term: str) -> str:
    return term.rstrip("*")[1:-1].replace('""', '"')


def fts5_idf(n: int, total: int) -> float:
    """FTS5's bm25 idf of a term in `n` of `total` rows (negative values clamped to 1e-6, as FTS5 does)."""
    return max(math.log((total - n + 0.5) / (n + 0.5)), 1e-6)


async def prune_common_terms(
    conn: aiosqlite.Connection,
    table: str,
    expr: str,
    *,
    weight_share: float | None = None,
    postings_share: float | None = None,
    min_chunks: int | None = None,
) -> str:
    """`expr` without its common terms (decision 0010; the defaults are the module's constants).

    Terms are taken rarest first: the rarest is always kept, and each next one while its idf is
    at least `weight_share` of the rarest matching term's idf and the kept terms' chunk counts
    add up to at most `postings_share` of the chunks. The kept terms stay in their order and the
    `NOT (...)` tail stays as it is. Returned unchanged: an expression of one term or of another
    shape, and any expression over fewer than `min_chunks` chunks.
    """
    weight_share = MIN_WEIGHT_SHARE if weight_share is None else weight_share
    postings_share = POSTINGS_SHARE if postings_share is None else postings_share
    min_chunks = PRUNE_MIN_CHUNKS if min_chunks is None else min_chunks
    parts = split_or_terms(expr)
    if parts is None or len(parts[0]) < 2:
        return expr
    if (await _vocab_cache(conn)).n_chunks < min_chunks:
        return expr
    terms, tail = parts
    texts = [_unquote(t) for t in terms]
    df, n = await term_doc_freq(conn, table, texts)
    counts = [df.get(text, 0) for text in texts]
    matching = [c for c in counts if c > 0]
    if not matching:
        return expr
    floor = weight_share * fts5_idf(min(matching), n)
    # The postings bound counts the rows the table holds terms for: the bigram table has a row
    # for every chunk, but only the chunks with CJK text hold any (47% of the scale bench's
    # 100k mixed chunks), and a leg can walk no more postings than those.
    budget = postings_share * await _indexed_rows(conn, table)
    by_rarity = sorted(range(len(terms)), key=lambda i: (counts[i], i))
    keep = {by_rarity[0]}
    spent = counts[by_rarity[0]]
    for i in by_rarity[1:]:
        if fts5_idf(counts[i], n) < floor or spent + counts[i] > budget:
            break
        keep.add(i)
        spent += counts[i]
    if len(keep) == len(terms):
        return expr
    body = " OR ".join(t for i, t in enumerate(terms) if i in keep)
    return f"({body}){tail}" if tail else body


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
        cache.n_chunks = int(one(await (await conn.execute("SELECT count(*) FROM chunks")).fetchone())[0])
    return cache


async def _indexed_rows(conn: aiosqlite.Connection, table: str) -> int:
    """Rows of a full-text table that hold at least one term (its docsize is not all zeros:
    FTS5 writes one varint per column, x'000000' for three empty columns). One scan of the
    docsize table, about 6 ms at 100k chunks, cached until the index changes."""
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
    if missing and table == WORD_TABLE:
        union = " UNION ALL ".join(f"SELECT ?, count(*) FROM {table} WHERE {table} MATCH ?" for _ in missing)
        cur = await conn.execute(union, [x for t in missing for x in (t, quote_phrase(t))])
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


async def term_doc_freq(conn: aiosqlite.Connection, table: str, terms: Sequence[str]) -> tuple[dict[str, int], int]:
    """Per term, how many chunks contain it, and the number of chunks: the idf of the evidence weights.

    Trigram table: a phrase's count is bounded by its rarest trigram (fts5vocab counts
    trigrams), which is exact for a phrase of 3 characters and close above. Bigram table: a
    term of one character counts the chunks of its most frequent bigram (it matches as a prefix).
    Word table: exact (the chunks the word's stem is in).
    """
    if table not in FTS_TABLES:
        raise ValueError(f"unknown full-text table {table!r}")
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
    matrix: VectorMatrix | None = None,
    min_quality: float | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, L2 distance) nearest first; for unit vectors cosine = 1 - d^2 / 2.

    With `matrix` (a long-running process's in-memory copy, store/vectors.py) the distances come
    from one matrix product; without it, or when it cannot answer, from sqlite-vec. With
    `min_quality`, over the chunks that score at least that: the KNN asks for a few more vectors, and when
    fewer than `limit` kept chunks are among them, for as many more as the hidden chunks hold (past
    sqlite-vec's k limit the chunks kept are scanned instead), so it returns `limit` hits whenever that
    many exist."""
    blob = np.asarray(query, dtype=np.float32).tobytes()
    exclude = exclude or set()
    kept, floor = (" AND quality >= ?", (min_quality,)) if min_quality else ("", ())
    if allowed_docs is not None:
        clause, params = _allowed_clause("doc_id", allowed_docs)
        clause, params = clause + kept, (*params, *floor)
        if matrix is not None:
            cur = await conn.execute(
                f"SELECT id, embedding_id FROM chunks WHERE embedding_id IS NOT NULL{clause}", params
            )
            pairs = [(cid, e) for cid, e in await cur.fetchall() if cid not in exclude]
            near = await matrix.nearest_among(conn, query, [e for _, e in pairs], limit)
            if near is not None:
                dist = dict(near)
                ranked = sorted(((dist[e], cid) for cid, e in pairs if e in dist))
                return [(cid, d) for d, cid in ranked][:limit]
        return await _scan(conn, blob, clause, params, limit, exclude)
    k = limit + len(exclude)
    hidden = await hidden_vector_count(conn, min_quality) if min_quality else 0
    # With a floor, a few of the hidden chunks' vectors are asked for as well: `limit` kept chunks among the
    # nearest vectors are the nearest kept chunks, so a first round that finds them is exact; else a second
    # asks for as many more as the hidden chunks hold.
    out: list[tuple[int, int, float]] = []
    for extra in dict.fromkeys((min(hidden, max(limit, 16)), hidden)):
        nearest = await matrix.nearest(conn, query, k + extra) if matrix is not None else None
        if nearest is None:
            if min_quality and k + extra > MAX_KNN_K:  # more than sqlite-vec's KNN gives: a scan of the chunks kept
                return await _scan(conn, blob, kept, floor, limit, exclude)
            nearest = await nearest_embeddings(conn, query, k + extra)
        if not nearest:
            return []
        rank = {emb_id: (i, float(d)) for i, (emb_id, d) in enumerate(nearest)}
        cur = await conn.execute(
            f"SELECT id, embedding_id FROM chunks WHERE embedding_id IN (SELECT value FROM json_each(?)){kept}",
            (json.dumps(list(rank)), *floor),
        )
        out = sorted((rank[e][0], cid, rank[e][1]) for cid, e in await cur.fetchall() if cid not in exclude)
        if len(out) >= limit or len(nearest) < k + extra:
            break
    return [(cid, d) for _, cid, d in out][:limit]


async def _scan(
    conn: aiosqlite.Connection, blob: bytes, clause: str, extra: tuple, limit: int, exclude: set[int]
) -> list[tuple[int, float]]:
    """An exact distance scan of the chunks `clause` keeps (a filter's documents, the quality floor)."""
    cur = await conn.execute(
        f"SELECT c.id, vec_distance_l2(v.embedding, ?) AS d FROM chunks c JOIN {VECTOR_TABLE} v ON v.rowid = "
        "c.embedding_id"
        f" WHERE c.embedding_id IS NOT NULL{clause}"
        " ORDER BY d, c.id LIMIT ?",
        (blob, *extra, limit + len(exclude)),
    )
    rows = [(r[0], float(r[1])) for r in await cur.fetchall()]
    return [r for r in rows if r[0] not in exclude][:limit]


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


async def fetch_hits(conn: aiosqlite.Connection, ids: Sequence[int]) -> dict[int, Hit]:
    if not ids:
        return {}
    cur = await conn.execute(_HIT_SQL, (POSITIONS_KEY, json.dumps(list(ids))))
    out: dict[int, Hit] = {}
    for r in await cur.fetchall():
        out[r[0]] = Hit(
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
            score=0.0,
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


class SqliteSearchReads:
    """`groove.store.interface.SearchReads` on one SQLite connection: the functions above; with
    `matrix`, KNN on the process's in-memory copy of the vectors (store/vectors.py); with `min_quality`,
    both retrievers see the index without the chunks that score under it (decision 0020)."""

    def __init__(
        self, conn: aiosqlite.Connection, matrix: VectorMatrix | None = None, min_quality: float | None = None
    ):
        self.conn = conn
        self.matrix = matrix
        self.min_quality = min_quality or None  # 0 hides nothing

    async def allowed_documents(self, filters: Any) -> list[int] | None:
        return await filters_mod.allowed_documents(self.conn, filters)

    async def fts_scored(
        self,
        match_expr: str,
        limit: int,
        weights: tuple[float, float, float] = (2.0, 1.0, 1.0),
        allowed_docs: Sequence[int] | None = None,
        table: str = "fts_chunks",
        exclude: set[int] | None = None,
    ) -> list[tuple[int, float]]:
        return await fts_scored(self.conn, match_expr, limit, weights, allowed_docs, table, exclude, self.min_quality)

    async def term_doc_freq(self, table: str, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        return await term_doc_freq(self.conn, table, terms)

    async def sent_expression(self, table: str, match_expr: str) -> str:
        return await prune_common_terms(self.conn, table, match_expr)

    async def fetch_texts(self, ids: Sequence[int]) -> dict[int, str]:
        return await fetch_texts(self.conn, ids)

    async def matching_ids(self, expr: str) -> set[int]:
        return await matching_ids(self.conn, expr)

    async def vector_scored(
        self, query: np.ndarray, limit: int, exclude: set[int] | None = None, allowed_docs: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        return await vector_scored(self.conn, query, limit, exclude, allowed_docs, self.matrix, self.min_quality)

    async def fetch_hits(self, ids: Sequence[int]) -> dict[int, Hit]:
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
