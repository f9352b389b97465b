"""The SQLite store: one index file, one writer process, readers beside it (WAL).

`SqliteStore.open` creates or checks the file and opens what the caller needs: the writer (its
connection, the writer lock, the indexer's `SqliteWrites`, the embedding queues) and, for a
long-running process, a pool of read-only connections; or one read-only connection for a command
that only reads. `reading()` yields a `SqliteReads` bound to one connection: every read of
`groove.store.protocols.Reads` on one consistent view.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import numpy as np

from groove.logs import get_logger
from groove.store.memory import VectorMatrix, read_all
from groove.store.protocols import PARKED_VECTOR_GRACE_S, DocumentFilter, SearchReads, TextKind, TextQuery, Weights
from groove.store.sqlite import connection, reads, schema, shadow, writer
from groove.store.sqlite.pool import ReaderPool
from groove.store.sqlite.search import STAMP_SQL, SqliteSearchReads, VectorRows, nearest_embeddings
from groove.store.sqlite.writer_lock import WriterLock

EVAL_HISTORY_SUFFIX = ".eval.jsonl"  # the eval history: a file beside the index

log = get_logger(__name__)


class SqliteReads:
    """Every read (`groove.store.protocols.Reads`) on one SQLite connection."""

    def __init__(self, conn: aiosqlite.Connection):
        self.conn = conn
        self._search = SqliteSearchReads(conn)
        self._vectors = VectorRows(conn)

    def searching(self, matrix: VectorMatrix | None = None, min_quality: float | None = None) -> SearchReads:
        return SqliteSearchReads(self.conn, matrix, min_quality)

    # -- SearchReads, over the whole index ---------------------------------------------------------------
    async def documents_matching(self, where: DocumentFilter) -> list[tuple[Any, ...]]:
        return await self._search.documents_matching(where)

    async def tag_names(self) -> list[str]:
        return await self._search.tag_names()

    async def text_scored(
        self,
        query: TextQuery,
        limit: int,
        weights: Weights = (2.0, 1.0, 1.0),
        allowed_docs: Sequence[int] | None = None,
        exclude: set[int] | None = None,
    ) -> list[tuple[int, float]]:
        return await self._search.text_scored(query, limit, weights, allowed_docs, exclude)

    async def doc_freq(self, kind: TextKind, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        return await self._search.doc_freq(kind, terms)

    async def indexed_rows(self, kind: TextKind) -> int:
        return await self._search.indexed_rows(kind)

    async def sent_expression(self, query: TextQuery) -> str:
        return await self._search.sent_expression(query)

    async def fetch_texts(self, ids: Sequence[int]) -> dict[int, str]:
        return await self._search.fetch_texts(ids)

    async def matching_ids(self, phrases: Sequence[str]) -> set[int]:
        return await self._search.matching_ids(phrases)

    async def section_labels(self) -> Sequence[tuple[int, str, str]]:
        return await self._search.section_labels()

    async def vector_scored(
        self, query: np.ndarray, limit: int, exclude: set[int] | None = None, allowed_docs: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        return await self._search.vector_scored(query, limit, exclude, allowed_docs)

    async def vector_legs(
        self,
        queries: Sequence[tuple[np.ndarray, int]],
        exclude: set[int] | None = None,
        allowed_docs: Sequence[int] | None = None,
    ) -> tuple[list[list[tuple[int, float]]], dict[int, np.ndarray]]:
        return await self._search.vector_legs(queries, exclude, allowed_docs)

    async def fetch_hits(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        return await self._search.fetch_hits(ids)

    async def fetch_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        return await self._search.fetch_vectors(chunk_ids)

    async def calibration_state(self) -> tuple[str, int, str | None]:
        return await self._search.calibration_state()

    async def calibration_passages(self, k: int) -> list[tuple[int, int, str]]:
        return await self._search.calibration_passages(k)

    async def chunk_docs(self, ids: Sequence[int]) -> dict[int, int]:
        return await self._search.chunk_docs(ids)

    async def chunk_quality(self, ids: Sequence[int]) -> dict[int, float]:
        return await self._search.chunk_quality(ids)

    async def low_quality_count(self, min_quality: float) -> int:
        return await self._search.low_quality_count(min_quality)

    async def fetch_doc_chunks(self, doc_ids: Sequence[int]) -> dict[int, list[tuple[Any, ...]]]:
        return await self._search.fetch_doc_chunks(doc_ids)

    async def pending_count(self) -> int:
        return await reads.pending_count(self.conn)

    # -- VectorSource (store/memory.py) ------------------------------------------------------------------
    async def vector_stamp(self) -> tuple[Any, ...]:
        return await self._vectors.vector_stamp()

    async def vector_ids_upto(self, max_id: int) -> np.ndarray:
        return await self._vectors.vector_ids_upto(max_id)

    async def count_vectors_after(self, max_id: int) -> int:
        return await self._vectors.count_vectors_after(max_id)

    async def vectors_after(self, max_id: int) -> list[tuple[int, bytes]]:
        return await self._vectors.vectors_after(max_id)

    # -- IndexReads ---------------------------------------------------------------------------------------
    async def meta(self, key: str) -> str | None:
        return await reads.get_meta(self.conn, key)

    async def status(self, location: str) -> dict[str, Any]:
        return await reads.status(self.conn, index_path=Path(location))

    async def count_documents_under(self, prefix: str) -> int:
        return await reads.count_documents_under(self.conn, prefix)

    async def get_document(self, path: str, *, with_chunks: bool = False) -> dict[str, Any] | None:
        return await reads.get_document(self.conn, path, with_chunks=with_chunks)

    async def list_documents(
        self, *, after: str, limit: int, folder: str | None, tags: list[str] | None
    ) -> tuple[list[dict[str, Any]], bool]:
        return await reads.list_documents(self.conn, after=after, limit=limit, folder=folder, tags=tags)

    async def paths_starting_with(self, prefix: str, limit: int) -> tuple[list[str], int]:
        return await reads.paths_starting_with(self.conn, prefix, limit)

    async def tags_starting_with(self, prefix: str, limit: int) -> tuple[list[str], int]:
        return await reads.tags_starting_with(self.conn, prefix, limit)

    async def topics(self, *, depth: int, limit: int) -> dict[str, Any]:
        return await reads.topics(self.conn, depth=depth, limit=limit)

    async def note_links(self, path: str, *, limit: int) -> dict[str, Any] | None:
        return await reads.note_links(self.conn, path, limit=limit)

    async def linked_notes(self, path: str) -> list[dict[str, Any]]:
        return await reads.linked_notes(self.conn, path)

    async def note_title(self, path: str) -> str | None:
        return await reads.note_title(self.conn, path)

    async def note_titles(self, paths: Sequence[str]) -> dict[str, str]:
        return await reads.note_titles(self.conn, list(paths))

    async def paths_of(self, doc_ids: Sequence[int]) -> dict[int, str]:
        return await reads.paths_of(self.conn, list(doc_ids))

    async def note_vectors(self, path: str, min_quality: float | None, limit: int) -> list[np.ndarray]:
        rows = await reads.note_vectors(self.conn, path, min_quality, limit)
        return [np.frombuffer(r, dtype=np.float32) for r in rows]

    async def passages_of_vectors(
        self, emb_ids: Sequence[int], min_quality: float | None
    ) -> list[tuple[int, int, str, str, int, int]]:
        return await reads.passages_of_vectors(self.conn, list(emb_ids), min_quality)

    async def nearest_vectors(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        return await nearest_embeddings(self.conn, query, k)

    async def hidden_vector_count(self, min_quality: float) -> int:
        from groove.store.sqlite.search import hidden_vector_count

        return await hidden_vector_count(self.conn, min_quality)

    async def chunk_locations(self) -> dict[int, dict[str, Any]]:
        return await reads.chunk_locations(self.conn)

    async def texts_containing(self, phrases: Sequence[str], limit: int) -> list[tuple[str, list[str]]]:
        return await reads.texts_containing(self.conn, list(phrases), limit)

    async def sample_contents(self, n: int) -> list[str]:
        return await reads.sample_contents(self.conn, n)

    async def known_documents(self) -> dict[str, tuple[int, int, int, str]]:
        return await reads.known_documents(self.conn)

    async def skipped(self) -> dict[str, str]:
        return await reads.skipped_files(self.conn)

    async def note_history(self, since: float, limit: int) -> list[tuple[Any, ...]]:
        return await reads.note_history(self.conn, since, limit)


class SqliteWrites:
    """`groove.store.protocols.IndexWrites` on the writer connection (and the reads the writer makes there)."""

    def __init__(self, conn: aiosqlite.Connection):
        self.conn = conn

    async def write_note(
        self, *, rel: str, parsed: Any, size: int, mtime_ns: int, file_hash: str, doc_id: int | None
    ) -> tuple[int, int]:
        done = await writer.write_note(
            self.conn, rel=rel, parsed=parsed, size=size, mtime_ns=mtime_ns, file_hash=file_hash, doc_id=doc_id
        )
        return done.doc_id, done.inserted

    async def touch_document(self, doc_id: int, size: int, mtime_ns: int) -> None:
        await writer.touch_document(self.conn, doc_id, size, mtime_ns)

    async def delete_documents(self, paths: Collection[str]) -> int:
        return await writer.delete_documents(self.conn, sorted(paths))

    async def record_skipped(self, skipped: Mapping[str, str], *, replace_all: bool) -> None:
        await writer.record_skipped(self.conn, dict(skipped), replace_all=replace_all)

    async def set_meta(self, key: str, value: str) -> None:
        await writer.set_meta(self.conn, key, value)

    async def collect_garbage(self, grace_s: float = PARKED_VECTOR_GRACE_S) -> int:
        return await writer.collect_garbage(self.conn, grace_s)

    async def collect_freed(self, grace_s: float = PARKED_VECTOR_GRACE_S) -> int:
        return await writer.collect_freed(self.conn, grace_s)

    async def merge_full_text(self, written: int) -> bool:
        return await writer.merge_full_text(self.conn, written)

    async def known_documents(self) -> dict[str, tuple[int, int, int, str]]:
        return await reads.known_documents(self.conn)

    async def skipped(self) -> dict[str, str]:
        return await reads.skipped_files(self.conn)

    async def meta(self, key: str) -> str | None:
        return await reads.get_meta(self.conn, key)

    async def sample_contents(self, n: int) -> list[str]:
        return await reads.sample_contents(self.conn, n)

    async def distinct_texts(self) -> int:
        """How many distinct chunk texts the index holds (a switch's share of texts left)."""
        cur = await self.conn.execute("SELECT count(DISTINCT hash) FROM chunks")
        return int(connection.one(await cur.fetchone())[0] or 0)


class SqliteQueue:
    """`EmbeddingStore` over the writer connection: the active vector set's queue."""

    name = "active"

    def __init__(self, conn: aiosqlite.Connection):
        self.conn = conn

    async def pending_count(self) -> int:
        return await reads.pending_count(self.conn)

    async def pending_batch(self, limit: int, exclude: Collection[str] = ()) -> list[tuple[str, str]]:
        return await writer.pending_batch(self.conn, limit, exclude)

    async def store_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> int:
        return await writer.store_vectors(self.conn, hashes, vectors)


class SqliteShadowQueue:
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


def load_all(path: Path) -> Any:
    """`VectorMatrix`'s loader for one index file: every vector on a connection of its own, in one read
    transaction with the stamp (store/memory.py)."""

    def load(max_bytes: int) -> tuple[tuple[Any, ...], Any]:
        con = connection.connect_sync(path, readonly=True)
        try:
            con.execute("BEGIN")
            stamp = tuple(con.execute(STAMP_SQL).fetchone())
            count = int(con.execute("SELECT count(*) FROM embeddings").fetchone()[0])
            cur = con.execute(f"SELECT rowid, embedding FROM {schema.VECTOR_TABLE}")
            got = read_all(stamp, count, iter(lambda: cur.fetchmany(4096), []), max_bytes)
            con.execute("COMMIT")
            return got
        finally:
            con.close()

    return load


class SqliteStore:
    """One open SQLite index file (`groove.store.protocols.Store`)."""

    kind = "sqlite"

    def __init__(self, path: Path):
        self.path = path
        self.location = str(path)
        self.switch: dict[str, Any] | None = None
        self.wconn: aiosqlite.Connection | None = None
        self.rconn: aiosqlite.Connection | None = None
        self.readers: ReaderPool | None = None
        self.lock: WriterLock | None = None
        self._writes: SqliteWrites | None = None

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        writer_: bool,
        pool: bool = False,
        model: str,
        dimension: int,
        describe: str = "",
        settings_json: str | None = None,
        any_model: bool = False,
        rebuild: bool = False,
    ) -> SqliteStore:
        """Open for writing (`writer_`: the writer lock, the file created or migrated, a model switch begun or
        resumed; with `pool`, readers beside it) or for reading (the file must exist and, unless `any_model`,
        match the model)."""
        store = cls(path)
        if not writer_:
            reads.check_existing_index(path, model=None if any_model else model, dimension=dimension)
            store.rconn = await connection.connect(path, readonly=True)
            return store
        store.lock = WriterLock(path)
        store.lock.acquire()  # IndexLockedError, naming the other writer, before anything is touched
        try:
            if rebuild:
                schema.remove_index_files(path)
                log.info("index_rebuild", index=str(path))
            schema.check_writable_file(path)  # another program's database is never written into
            store.switch = reads.prepare_index(
                path, model=model, dimension=dimension, kb_path=describe, settings_json=settings_json, switch=True
            )
            store.lock.hold_identity()  # a new index file exists now: lock its identity (device + inode) too
            store.wconn = await connection.connect(path)
            await writer.track_freed_vectors(store.wconn)
            store._writes = SqliteWrites(store.wconn)
            if pool:
                store.readers = ReaderPool(path)
        except BaseException:
            await store.close()
            raise
        return store

    @property
    def writable(self) -> bool:
        return self.wconn is not None

    @property
    def writes(self) -> SqliteWrites:
        assert self._writes is not None, "open the index as a writer to write"
        return self._writes

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[SqliteReads]:
        """A view to read with: a connection from the pool (daemon), the read-only one, else the writer's."""
        if self.readers is not None:
            async with self.readers.connection() as conn:
                yield SqliteReads(conn)
        else:
            own = self.rconn or self.wconn
            assert own is not None, "the index is not open"
            yield SqliteReads(own)

    @asynccontextmanager
    async def spare_reading(self) -> AsyncIterator[SqliteReads | None]:
        """A second view for a search that holds one, if the pool has a connection free now; else None."""
        if self.readers is None:
            yield None
        else:
            async with self.readers.spare() as conn:
                yield None if conn is None else SqliteReads(conn)

    def queue(self, shadow_set: bool = False) -> SqliteQueue | SqliteShadowQueue:
        assert self.wconn is not None, "open the index as a writer to embed"
        return SqliteShadowQueue(self.wconn) if shadow_set else SqliteQueue(self.wconn)

    def vector_memory(self, max_bytes: int) -> VectorMatrix:
        return VectorMatrix(load_all(self.path), max_bytes)

    async def shadow_pending(self) -> int:
        assert self.wconn is not None
        return await shadow.pending_count(self.wconn)

    async def swap_shadow(self) -> dict[str, Any]:
        assert self.wconn is not None
        return await shadow.swap(self.wconn)

    @property
    def _history_file(self) -> Path:
        return Path(str(self.path) + EVAL_HISTORY_SUFFIX)

    @property
    def eval_history_location(self) -> str:
        return str(self._history_file)

    async def eval_history(self) -> list[str]:
        def read() -> list[str]:
            try:
                return self._history_file.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                return []

        return await anyio.to_thread.run_sync(read)

    async def append_eval_history(self, line: str, keep: int) -> None:
        def write() -> None:  # a temporary file renamed over the old one
            path = self._history_file
            try:
                old = path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                old = []
            lines = [*old, line][-keep:] if keep > 0 else []
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
            os.replace(tmp, path)

        await anyio.to_thread.run_sync(write)

    async def folders(self) -> list[dict[str, Any]]:
        return []  # one process writes the file: its folders are the configuration's

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            if self.readers is not None:
                await self.readers.close()
                self.readers = None
            if self.rconn is not None:
                await self.rconn.close()
                self.rconn = None
            if self.wconn is not None:
                # Take the write lock so the current transaction finishes first.
                async with writer.write_lock(self.wconn):
                    await self.wconn.close()
                self.wconn = None
            if self.lock is not None:
                self.lock.release()
                self.lock = None
