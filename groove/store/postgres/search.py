"""The PostgreSQL store's search reads: the three full-text legs with FTS5's bm25, the vector leg, rows by id.

bm25 is computed as FTS5 computes it (k1 = 1.2, b = 0.75; a term's idf ln((N - n + 0.5) / (n + 0.5)), clamped
to 1e-6; a term's count in a row the sum of its counts in each column times the column's weight; a row's
length its tokens in all columns, against their average over the chunks), over the same tokens
(groove/corpus/tokens.py), so a leg ranks as the SQLite store's does (decision 0022):

- phrases: the chunks whose joined phrase text holds the phrase (pg_trgm's GIN index finds them, LIKE
  confirms), a phrase's count in a column the times it occurs there, n the chunks holding it;
- bigrams and words: the `postings` rows of the terms (a one-character CJK term by its prefix key), n from
  `vocab`.

Counts that a search needs before its legs (a phrase's chunks, for the common-term rule) are cached per
process for PHRASE_COUNT_TTL_S: they move by a chunk or two per edit, which changes no idf that matters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from groove.corpus import tokens
from groove.corpus.parsers.document import POSITIONS_KEY, position_of
from groove.store import knn
from groove.store.memory import VectorMatrix
from groove.store.postgres.schema import KIND
from groove.store.protocols import DocumentFilter, TextKind, TextQuery, Weights, day_after

PHRASE_COUNT_TTL_S = 300.0
STATS_TTL_S = 5.0
JOINED = "(c.fold_h || chr(31) || c.fold_x || chr(31) || c.fold_c)"  # the phrases index's GIN expression
K1, B = 1.2, 0.75

Conn = psycopg.AsyncConnection[Any]


def as_array(value: Any) -> np.ndarray:
    """A vector as pgvector's adapter returns it (its `Vector`, or an array) as float32."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def _trigrams(text: str) -> list[str]:
    return [text[i : i + 3] for i in range(len(text) - 2)]


def like_pattern(phrase: str) -> str:
    """`%phrase%` with LIKE's own characters escaped (backslash is LIKE's default escape)."""
    return "%" + phrase.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class Counts:
    """Per process: the chunk count and each index's average length (a few seconds), phrase counts (minutes)."""

    def __init__(self) -> None:
        self.stats: tuple[float, dict[int, tuple[int, int]], int] | None = None
        self.phrases: dict[str, tuple[float, int]] = {}

    async def totals(self, conn: Conn) -> tuple[dict[int, tuple[int, int]], int]:
        """({kind: (chunks holding a term, total length)}, chunks)."""
        now = time.monotonic()
        if self.stats is None or now - self.stats[0] > STATS_TTL_S:
            cur = await conn.execute("SELECT kind, rows, length FROM text_stats")
            rows = {int(k): (int(r), int(n)) for k, r, n in await cur.fetchall()}
            self.stats = (now, rows, rows.get(3, (0, 0))[0])
        return self.stats[1], self.stats[2]

    async def phrase_counts(self, conn: Conn, phrases: Sequence[str]) -> dict[str, int]:
        now = time.monotonic()
        out: dict[str, int] = {}
        for p in phrases:
            hit = self.phrases.get(p)
            if hit is not None and now - hit[0] < PHRASE_COUNT_TTL_S:
                out[p] = hit[1]
                continue
            if len(p) < 3:
                n = 0  # a phrase of under 3 characters holds no trigram: it matches nothing (as in FTS5)
            else:
                cur = await conn.execute(f"SELECT count(*) FROM chunks c WHERE {JOINED} LIKE %s", (like_pattern(p),))
                n = int((await cur.fetchone() or (0,))[0])
            self.phrases[p] = (now, n)
            out[p] = n
        if len(self.phrases) > 50_000:
            self.phrases.clear()
        return out


def _weighted(weights: Weights) -> str:
    wh, wx, wc = (float(w) for w in weights)
    # float8 weights: with bare literals PostgreSQL does this sum in numeric, twice the words leg's time.
    return (
        f"({wh!r}::float8 * (p.tf / 1000000) + {wx!r}::float8 * ((p.tf / 1000) %% 1000)"
        f" + {wc!r}::float8 * (p.tf %% 1000))"
    )


class PostgresSearchReads:
    """`groove.store.protocols.SearchReads` on one PostgreSQL connection (see the module doc)."""

    engine = "postgresql"

    def __init__(
        self, conn: Conn, counts: Counts, matrix: VectorMatrix | None = None, min_quality: float | None = None
    ):
        self.conn = conn
        self.counts = counts
        self.matrix = matrix
        self.min_quality = min_quality or None

    # -- filters -----------------------------------------------------------------------------------------
    async def tag_names(self) -> list[str]:
        cur = await self.conn.execute('SELECT DISTINCT tag COLLATE "C" FROM doc_tags ORDER BY 1')
        return [r[0] for r in await cur.fetchall()]

    async def documents_matching(self, where: DocumentFilter) -> list[tuple[Any, ...]]:
        clauses: list[str] = []
        args: list[Any] = []
        if where.tags_any:
            clauses.append("id IN (SELECT doc_id FROM doc_tags WHERE tag = ANY(%s))")
            args.append(list(where.tags_any))
        for tag in dict.fromkeys(where.tags_all):
            clauses.append("id IN (SELECT doc_id FROM doc_tags WHERE tag = %s)")
            args.append(tag)
        if where.date_from:
            clauses.append("date >= %s")
            args.append(where.date_from)
        if where.date_to:
            after = day_after(where.date_to)
            clauses.append("date < %s" if after else "date IS NOT NULL")
            args += [after] if after else []
        columns = "id, path" + (", frontmatter" if where.with_frontmatter else "")
        cur = await self.conn.execute(
            f"SELECT {columns} FROM documents WHERE {' AND '.join(clauses) or 'true'} ORDER BY id", args
        )
        rows = await cur.fetchall()
        if where.with_frontmatter:
            return [(r[0], r[1], json.loads(r[2])) for r in rows]
        return [(r[0], r[1]) for r in rows]

    # -- full text -----------------------------------------------------------------------------------------
    async def doc_freq(self, kind: TextKind, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        _, n = await self.counts.totals(self.conn)
        if not terms:
            return {}, n
        if kind == "phrases":
            # As the SQLite store estimates it (FTS5 counts trigrams, not phrases): a phrase's chunks are at most
            # its rarest trigram's, exact for a phrase of 3 characters, 0 under 3.
            grams = {t: _trigrams(t.casefold()) for t in terms}
            counts = await self.counts.phrase_counts(self.conn, sorted({g for gs in grams.values() for g in gs}))
            return {t: min(counts[g] for g in gs) if gs else 0 for t, gs in grams.items()}, n
        if kind == "words":  # exact: the chunks the word's stem is in
            keys = self._keys(kind, terms)
        else:  # as the SQLite store reads FTS5's vocabulary: the term as written (a bigram a separator splits: 0)
            keys = {t: t for t in terms if len(t) > 1}
        cur = await self.conn.execute(
            "SELECT term, df FROM vocab WHERE kind = %s AND term = ANY(%s)", (KIND[kind], list(set(keys.values())))
        )
        df = {t: int(d) for t, d in await cur.fetchall()}
        out = {t: df.get(k, 0) for t, k in keys.items()}
        for t in terms:
            if t not in keys:  # one CJK character: its most frequent bigram's chunks (it matches as a prefix)
                cur = await self.conn.execute(
                    "SELECT max(df) FROM vocab WHERE kind = %s AND term >= %s AND term < %s AND right(term, 1) <> '*'",
                    (KIND[kind], t, t + "\U0010ffff"),
                )
                out[t] = int((await cur.fetchone() or (0,))[0] or 0)
        return out, n

    @staticmethod
    def _keys(kind: TextKind, terms: Sequence[str], prefix: frozenset[str] = frozenset()) -> dict[str, str]:
        """Each query term's postings key, the token FTS5 reads the quoted term as: a word's stem; a bigram as
        unicode61 splits it (`ル・` is the token `ル`: the middle dot separates); a one-character CJK term's prefix
        key. A term with no token keeps a key no posting has."""
        if kind == "words":
            return {t: (tokens.query_words(t) or [t])[0] for t in terms}
        out = {}
        for t in terms:
            toks = tokens.unicode61(t, remove_diacritics=False)
            token = toks[0] if toks else t
            out[t] = tokens.prefix_key(token) if (t in prefix or len(t) == 1) else token
        return out

    async def indexed_rows(self, kind: TextKind) -> int:
        stats, _ = await self.counts.totals(self.conn)
        return stats.get(KIND[kind], (0, 0))[0]

    async def sent_expression(self, query: TextQuery) -> str:
        keys = self._keys(query.kind, query.terms, query.prefix)
        shown = " OR ".join(json.dumps(keys[t], ensure_ascii=False) for t in query.terms)
        if query.excluded:
            shown = f"({shown}) NOT ({' OR '.join(json.dumps(p, ensure_ascii=False) for p in query.excluded)})"
        return f"{query.kind}: {shown}"

    async def text_scored(
        self,
        query: TextQuery,
        limit: int,
        weights: Weights = (2.0, 1.0, 1.0),
        allowed_docs: Sequence[int] | None = None,
        exclude: set[int] | None = None,
    ) -> list[tuple[int, float]]:
        exclude = exclude or set()
        if not query.terms:
            return []
        stats, n = await self.counts.totals(self.conn)
        if n == 0:
            return []
        avg = max(stats.get(KIND[query.kind], (0, 0))[1] / n, 1e-9)
        want = limit + len(exclude)
        if query.kind == "phrases":
            rows = await self._phrases(query, want, weights, allowed_docs, n, avg)
        else:
            rows = await self._postings(query, want, weights, allowed_docs, n, avg)
        return [(cid, s) for cid, s in rows if cid not in exclude][:limit]

    def _kept(self, allowed_docs: Sequence[int] | None) -> tuple[str, list[Any]]:
        clause, args = "", list[Any]()
        if allowed_docs is not None:
            clause += " AND c.doc_id = ANY(%s)"
            args.append(list(allowed_docs))
        if self.min_quality:
            clause += " AND c.quality >= %s"
            args.append(self.min_quality)
        return clause, args

    async def _phrases(
        self, query: TextQuery, want: int, weights: Weights, allowed: Sequence[int] | None, n: int, avg: float
    ) -> list[tuple[int, float]]:
        # Each term is a phrase of its own, as FTS5 reads `"a" OR "b"`: two spellings that fold alike count twice.
        phrases = [p for p in (tokens.phrase_query(t) for t in query.terms) if len(p) >= 3]
        if not phrases:
            return []
        wh, wx, wc = (float(w) for w in weights)
        kept, args = self._kept(allowed)
        negatives = [like_pattern(tokens.phrase_query(p)) for p in query.excluded if len(p) >= 3]
        if negatives:
            kept += f" AND NOT {JOINED} LIKE ANY(%s)"
            args.append(negatives)
        sql = f"""
WITH q AS (SELECT p, pat, i FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS q(p, pat, i)),
m AS MATERIALIZED (
    SELECT q.i, c.id,
        (length(c.fold_h) - length(replace(c.fold_h, q.p, ''))) / length(q.p) AS fh,
        (length(c.fold_x) - length(replace(c.fold_x, q.p, ''))) / length(q.p) AS fx,
        (length(c.fold_c) - length(replace(c.fold_c, q.p, ''))) / length(q.p) AS fc
    FROM q CROSS JOIN LATERAL (SELECT id, fold_h, fold_x, fold_c FROM chunks c WHERE {JOINED} LIKE q.pat) c
),
h AS (SELECT * FROM m WHERE fh + fx + fc > 0),
d AS (SELECT i, greatest(ln((%s - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) AS idf FROM h GROUP BY i),
s AS (
    SELECT h.id, sum(d.idf * f * {K1 + 1} / (f + {K1} * ({1 - B} + {B} * c.phrase_len / %s))) AS score
    FROM (SELECT h.*, ({wh!r}::float8 * h.fh + {wx!r}::float8 * h.fx + {wc!r}::float8 * h.fc) AS f FROM h) h
    JOIN d USING (i) JOIN chunks c ON c.id = h.id
    WHERE true{kept}
    GROUP BY h.id
)
SELECT id, -score FROM s ORDER BY score DESC, id LIMIT %s"""
        cur = await self.conn.execute(sql, [phrases, [like_pattern(p) for p in phrases], n, avg, *args, want])
        return [(int(a), float(b)) for a, b in await cur.fetchall()]

    async def _postings(
        self, query: TextQuery, want: int, weights: Weights, allowed: Sequence[int] | None, n: int, avg: float
    ) -> list[tuple[int, float]]:
        # Each query term is a phrase of its own, as FTS5 reads `"a" OR "b"`: two words with one stem count twice.
        mapped = self._keys(query.kind, query.terms, query.prefix)
        keys = [mapped[t] for t in query.terms]
        kind = KIND[query.kind]
        cur = await self.conn.execute(
            "SELECT term, df FROM vocab WHERE kind = %s AND term = ANY(%s)", (kind, list(set(keys)))
        )
        df = {t: int(d) for t, d in await cur.fetchall()}
        keys = [k for k in keys if df.get(k)]
        if not keys:
            return []
        idf = [max(float(np.log((n - df[k] + 0.5) / (df[k] + 0.5))), 1e-6) for k in keys]
        if allowed is not None:  # a filter: the chunks of the allowed notes, by a join
            kept, args = self._kept(allowed)
            join = f" JOIN chunks c ON c.id = p.chunk_id WHERE true{kept}"
        elif self.min_quality:  # only the quality bar: leave out the few low ones (a hashed anti-join, from an index)
            join, args = " WHERE p.chunk_id NOT IN (SELECT id FROM chunks WHERE quality < %s)", [self.min_quality]
        else:
            join, args = "", []
        sql = f"""
WITH q AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS q(term, idf)),
p AS (SELECT p.chunk_id, q.idf, {_weighted(weights)} AS f, p.dl
      FROM q JOIN postings p ON p.kind = %s AND p.term = q.term)
SELECT p.chunk_id, -sum(p.idf * p.f * {K1 + 1} / (p.f + {K1} * ({1 - B} + {B} * p.dl / %s))) AS score
FROM p{join}
GROUP BY p.chunk_id ORDER BY score, p.chunk_id LIMIT %s"""
        cur = await self.conn.execute(sql, [keys, idf, kind, avg, *args, want])
        return [(int(a), float(b)) for a, b in await cur.fetchall()]

    async def fetch_texts(self, ids: Sequence[int]) -> dict[int, str]:
        if not ids:
            return {}
        cur = await self.conn.execute(
            "SELECT id, heading || chr(10) || context || chr(10) || content FROM chunks WHERE id = ANY(%s)",
            (list(ids),),
        )
        from groove.corpus import normalize

        return {int(cid): normalize.fold(text) for cid, text in await cur.fetchall()}

    async def section_labels(self) -> list[tuple[int, str, str]]:
        cur = await self.conn.execute("SELECT id, heading, context FROM chunks")
        return [(int(a), str(b), str(c)) for a, b, c in await cur.fetchall()]

    async def matching_ids(self, phrases: Sequence[str]) -> set[int]:
        pats = [like_pattern(tokens.phrase_query(p)) for p in phrases if len(p) >= 3]
        if not pats:
            return set()
        cur = await self.conn.execute(f"SELECT id FROM chunks c WHERE {JOINED} LIKE ANY(%s)", (pats,))
        return {int(r[0]) for r in await cur.fetchall()}

    # -- vectors (groove/store/knn.py's StoredVectors) -------------------------------------------------------
    @property
    def knn_limit(self) -> int | None:
        return None  # pgvector's HNSW takes any k (ef_search follows it)

    async def nearest_vectors(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(vector id, L2 distance) by pgvector's HNSW index (ef_search at least k), distances exact."""
        q = np.asarray(query, dtype=np.float32)
        async with self.conn.transaction():
            await self.conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(1000, 2 * k))}")
            cur = await self.conn.execute(
                "SELECT id, embedding <-> %s AS d FROM embeddings ORDER BY embedding <-> %s LIMIT %s", (q, q, k)
            )
            return [(int(a), float(b)) for a, b in await cur.fetchall()]

    async def scan_chunks(
        self, query: np.ndarray, allowed_docs: Sequence[int] | None, min_quality: float | None, k: int
    ) -> list[tuple[int, float]]:
        where, args = self._chunks_where(allowed_docs, min_quality)
        cur = await self.conn.execute(
            "SELECT c.id, e.embedding <-> %s AS d FROM chunks c JOIN embeddings e ON e.id = c.embedding_id"
            f" WHERE {where} ORDER BY d, c.id LIMIT %s",
            [np.asarray(query, dtype=np.float32), *args, k],
        )
        return [(int(a), float(b)) for a, b in await cur.fetchall()]

    async def chunk_vectors(self, allowed_docs: Sequence[int], min_quality: float | None) -> list[tuple[int, int]]:
        return await self._pairs(*self._chunks_where(allowed_docs, min_quality))

    async def chunks_of_vectors(self, emb_ids: Sequence[int], min_quality: float | None) -> list[tuple[int, int]]:
        where, args = self._chunks_where(None, min_quality)
        return await self._pairs(where + " AND c.embedding_id = ANY(%s)", [*args, list(emb_ids)])

    async def _pairs(self, where: str, args: list[Any]) -> list[tuple[int, int]]:
        cur = await self.conn.execute(f"SELECT c.id, c.embedding_id FROM chunks c WHERE {where}", args)
        return [(int(cid), int(e)) for cid, e in await cur.fetchall()]

    @staticmethod
    def _chunks_where(allowed_docs: Sequence[int] | None, min_quality: float | None) -> tuple[str, list[Any]]:
        """The chunks with a vector, of the allowed documents (all, when None), scoring at least `min_quality`."""
        where, args = "c.embedding_id IS NOT NULL", list[Any]()
        if allowed_docs is not None:
            where, args = where + " AND c.doc_id = ANY(%s)", [list(allowed_docs)]
        if min_quality:
            where, args = where + " AND c.quality >= %s", [*args, min_quality]
        return where, args

    async def vector_scored(
        self, query: np.ndarray, limit: int, exclude: set[int] | None = None, allowed_docs: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        legs, _ = await knn.vector_legs(
            self, self.matrix, [(query, limit)], exclude, allowed_docs, self.min_quality, vectors=False
        )
        return legs[0]

    async def vector_legs(
        self,
        queries: Sequence[tuple[np.ndarray, int]],
        exclude: set[int] | None = None,
        allowed_docs: Sequence[int] | None = None,
    ) -> tuple[list[list[tuple[int, float]]], dict[int, np.ndarray]]:
        """groove/store/knn.py over this connection: with the in-memory copy, every query in one pass over it
        and the chunks' vectors from it; without one, pgvector's HNSW query by query and the vectors read here."""
        return await knn.vector_legs(self, self.matrix, queries, exclude, allowed_docs, self.min_quality)

    async def hidden_vector_count(self, min_quality: float) -> int:
        cur = await self.conn.execute(
            "SELECT count(DISTINCT embedding_id) FROM chunks WHERE quality < %s AND embedding_id IS NOT NULL",
            (min_quality,),
        )
        return int((await cur.fetchone() or (0,))[0])

    async def fetch_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        if not chunk_ids:
            return {}
        cur = await self.conn.execute(
            "SELECT c.id, e.embedding FROM chunks c JOIN embeddings e ON e.id = c.embedding_id WHERE c.id = ANY(%s)",
            (list(chunk_ids),),
        )
        return {int(cid): as_array(v) for cid, v in await cur.fetchall()}

    # -- rows ---------------------------------------------------------------------------------------------
    async def fetch_hits(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        if not ids:
            return {}
        cur = await self.conn.execute(
            "SELECT c.id, c.doc_id, d.path, d.title, c.heading, c.level, c.context, c.content, d.tags, d.date,"
            " c.start_line, c.end_line, c.ordinal, c.token_count, d.frontmatter"
            " FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = ANY(%s)",
            (list(ids),),
        )
        out: dict[int, dict[str, Any]] = {}
        for r in await cur.fetchall():
            try:
                positions = json.loads(r[14]).get(POSITIONS_KEY)
            except (ValueError, AttributeError):
                positions = None
            out[int(r[0])] = dict(
                chunk_id=int(r[0]),
                doc_id=int(r[1]),
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
                position=position_of(positions, r[10]),
            )
        return out

    async def fetch_doc_chunks(self, doc_ids: Sequence[int]) -> dict[int, list[tuple[Any, ...]]]:
        if not doc_ids:
            return {}
        cur = await self.conn.execute(
            "SELECT doc_id, ordinal, level, heading, content, start_line, end_line, token_count FROM chunks"
            " WHERE doc_id = ANY(%s) ORDER BY doc_id, ordinal",
            (list(doc_ids),),
        )
        out: dict[int, list[tuple[Any, ...]]] = {}
        for r in await cur.fetchall():
            out.setdefault(int(r[0]), []).append(tuple(r[1:]))
        return out

    async def pending_count(self) -> int:
        cur = await self.conn.execute("SELECT count(*) FROM chunks WHERE embedding_id IS NULL")
        return int((await cur.fetchone() or (0,))[0])

    async def calibration_state(self) -> tuple[str, int, str | None]:
        cur = await self.conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = 'model'), (SELECT max(id) FROM embeddings),"
            " (SELECT value FROM meta WHERE key = 'vectors_removed'),"
            " (SELECT value FROM meta WHERE key = 'off_topic_calibration')"
        )
        model, max_id, removed, stored = await cur.fetchone() or (None, None, None, None)
        return str(model or ""), max(0, int(max_id or 0) - int(removed or 0)), stored

    async def calibration_passages(self, k: int) -> list[tuple[int, int, str]]:
        kept, floor = (" AND quality >= %s", [self.min_quality]) if self.min_quality else ("", [])
        cur = await self.conn.execute(
            "SELECT id, doc_id, content FROM chunks WHERE embedding_id IS NOT NULL AND length(content) >= 20"
            + kept
            + " ORDER BY (id * 2654435761) %% 4294967291, id LIMIT %s",
            [*floor, k],
        )
        return [(int(a), int(b), str(c)) for a, b, c in await cur.fetchall()]

    async def chunk_docs(self, ids: Sequence[int]) -> dict[int, int]:
        if not ids:
            return {}
        cur = await self.conn.execute("SELECT id, doc_id FROM chunks WHERE id = ANY(%s)", (list(ids),))
        return {int(a): int(b) for a, b in await cur.fetchall()}

    async def chunk_quality(self, ids: Sequence[int]) -> dict[int, float]:
        if not ids:
            return {}
        cur = await self.conn.execute("SELECT id, quality FROM chunks WHERE id = ANY(%s)", (list(ids),))
        return {int(a): float(b) for a, b in await cur.fetchall()}

    async def low_quality_count(self, min_quality: float) -> int:
        cur = await self.conn.execute("SELECT count(*) FROM chunks WHERE quality < %s", (min_quality,))
        return int((await cur.fetchone() or (0,))[0])

    # -- VectorSource (store/memory.py) -------------------------------------------------------------------
    async def vector_stamp(self) -> tuple[Any, ...]:
        cur = await self.conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = 'model'), (SELECT value FROM meta WHERE key = 'dimension'),"
            " (SELECT max(id) FROM embeddings), (SELECT value FROM meta WHERE key = 'vectors_removed')"
        )
        return tuple(await cur.fetchone() or ())

    async def vector_ids_upto(self, max_id: int) -> np.ndarray:
        cur = await self.conn.execute("SELECT id FROM embeddings WHERE id <= %s ORDER BY id", (max_id,))
        return np.fromiter((r[0] for r in await cur.fetchall()), dtype=np.int64)

    async def count_vectors_after(self, max_id: int) -> int:
        cur = await self.conn.execute("SELECT count(*) FROM embeddings WHERE id > %s", (max_id,))
        return int((await cur.fetchone() or (0,))[0])

    async def vectors_after(self, max_id: int) -> list[tuple[int, bytes]]:
        cur = await self.conn.execute("SELECT id, embedding FROM embeddings WHERE id > %s", (max_id,))
        return [(int(i), as_array(v).tobytes()) for i, v in await cur.fetchall()]
