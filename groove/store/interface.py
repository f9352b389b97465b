"""The store as the search and sync layers see it: two narrow protocols.

`SearchReads` is every read a search makes (full text, vectors, rows);
`EmbeddingStore` is the embedding queue (pending texts in, vectors out). The
SQLite implementations are `groove.search.retrievers.SqliteSearchReads` (the
SQL of the retrievers) and `SqliteEmbeddingStore` below. Another store, such
as PostgreSQL with pgvector for a shared corpus (docs/scale-out.md), is one
adapter per protocol: the pipeline, fusion, refine stages and the embedding
workers do not change.

Types from the layers above (`Filters`, `Hit`) cannot be named here (imports
go downward only); they appear as `Any` with their name in the docstring.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

import aiosqlite
import numpy as np

from groove.store import reads, shadow, writer

# The vector table the search reads name (retrievers' KNN, filtered scan and MMR fetch
# take it from here; the schema and the writer still spell it in store/schema.py and writer.py).
VECTOR_TABLE = "vec_embeddings"


class SearchReads(Protocol):
    """The reads of one search, on one consistent view of the index. The view may leave out the chunks
    under a quality floor (decision 0020): `fts_scored` and `vector_scored` then never return them
    (the SQLite reads do when built with `min_quality`)."""

    async def allowed_documents(self, filters: Any) -> list[int] | None:
        """Ids of the documents a `Filters` allows; None when there is no filter."""

    async def fts_scored(
        self,
        match_expr: str,
        limit: int,
        weights: tuple[float, float, float],
        allowed_docs: Sequence[int] | None,
        table: str,
        exclude: set[int] | None,
    ) -> list[tuple[int, float]]:
        """(chunk id, bm25) best first over one full-text table (bm25 negative, lower is better)."""

    async def term_doc_freq(self, table: str, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """Chunks containing each term, and the number of chunks (the evidence idf)."""

    async def sent_expression(self, table: str, match_expr: str) -> str:
        """The expression `fts_scored` hands the full-text engine for `match_expr` (for explain)."""

    async def fetch_texts(self, ids: Sequence[int]) -> dict[int, str]:
        """Heading, context and content of each chunk as one text."""

    async def matching_ids(self, expr: str) -> set[int]:
        """Every chunk id a full-text expression matches (the exclusion set)."""

    async def vector_scored(
        self, query: np.ndarray, limit: int, exclude: set[int] | None, allowed_docs: Sequence[int] | None
    ) -> list[tuple[int, float]]:
        """(chunk id, L2 distance) nearest first."""

    async def fetch_hits(self, ids: Sequence[int]) -> dict[int, Any]:
        """A `groove.search.hits.Hit` (score 0) per chunk id."""

    async def fetch_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of the given chunks."""

    async def calibration_state(self) -> tuple[str, int, str | None]:
        """The vector set's model and size, and the off_topic calibration stored with the index (JSON)."""

    async def calibration_passages(self, k: int) -> list[tuple[int, int, str]]:
        """(chunk id, doc id, content) of a fixed sample of up to `k` embedded chunks."""

    async def chunk_docs(self, ids: Sequence[int]) -> dict[int, int]:
        """The doc id of each chunk id."""

    async def chunk_quality(self, ids: Sequence[int]) -> dict[int, float]:
        """The stored quality score (0..1) of each chunk id."""

    async def low_quality_count(self, min_quality: float) -> int:
        """How many chunks of the index score under `min_quality`."""

    async def fetch_doc_chunks(self, doc_ids: Sequence[int]) -> dict[int, list[tuple[Any, ...]]]:
        """(ordinal, level, heading, content, start_line, end_line, token_count) per document, in order."""

    async def pending_count(self) -> int:
        """Chunks still without a vector."""


class EmbeddingStore(Protocol):
    """The embedding queue: texts without a vector, and where their vectors go."""

    async def pending_count(self) -> int: ...

    async def pending_batch(self, limit: int, exclude: Collection[str] = ()) -> list[tuple[str, str]]:
        """(hash, text) of the next texts to embed, newest edits first, without `exclude`."""

    async def store_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> int:
        """Store the vectors of these texts and attach them to their chunks; chunks updated."""


class SqliteEmbeddingStore:
    """`EmbeddingStore` over the writer connection."""

    def __init__(self, conn: aiosqlite.Connection):
        self.conn = conn

    async def pending_count(self) -> int:
        return await reads.pending_count(self.conn)

    async def pending_batch(self, limit: int, exclude: Collection[str] = ()) -> list[tuple[str, str]]:
        return await writer.pending_batch(self.conn, limit, exclude)

    async def store_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> int:
        return await writer.store_vectors(self.conn, hashes, vectors)


class SqliteShadowStore:
    """`EmbeddingStore` over a model switch's shadow set (decision 0008): texts without a
    vector of the new model, and the shadow tables their vectors go to."""

    name = "shadow"

    def __init__(self, conn: aiosqlite.Connection):
        self.conn = conn
        self.after = ""  # the last hash handed out: the next batch starts past it (keyset)

    async def pending_count(self) -> int:
        return await shadow.pending_count(self.conn)

    async def pending_batch(self, limit: int, exclude: Collection[str] = ()) -> list[tuple[str, str]]:
        rows, self.after = await shadow.pending_batch_from(self.conn, limit, exclude, self.after)
        return rows

    async def store_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> int:
        return await shadow.store_vectors(self.conn, hashes, vectors)
