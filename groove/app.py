"""The index as one object: settings -> paths -> embedder -> connections -> searcher.

`Index` is the only place that wires groove together. `groove index`,
`search`, `status`, `related`, `eval` and the daemon all go through it:

    async with Index.open(settings) as index:                 # writer: `groove index`
        stats = await index.reconcile()
        await index.embed_pending()

    async with Index.open(settings, readonly=True) as index:  # the read commands
        await index.search(SearchRequest(query="..."))

The daemon opens it as a writer with a pool of read-only connections
(`pool=True`): searches never wait for writes (decision 0003).

It owns the notes folder and the index path (resolved once, here), the
embedder, the query batcher, the write connection and the indexer (writer
mode), the read connection(s), the `Searcher` and the reranker factory.
"""

from __future__ import annotations

import json
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Sequence

import aiosqlite
import anyio
import numpy as np

from groove.config import Settings
from groove.corpus.cjk import cjk_share
from groove.embed.embedder import Embedder, make_embedder, model_fit_warning
from groove.embed.pool import BulkLimiter, QueryBatcher
from groove.embed.reranker import CrossEncoderReranker
from groove.errors import NotFoundError, UsageError
from groove.evaluate.golden import JudgedQuery, load as load_golden
from groove.evaluate.runner import run_eval
from groove.logs import get_logger
from groove.search.compiler import QueryError, compile_query
from groove.search.pipeline import Reranker, Searcher
from groove.search.related import related_notes
from groove.search.request import SearchRequest
from groove.store import db, reads, writer
from groove.store.pool import ReaderPool
from groove.sync.embedding import EmbedQueue, Progress
from groove.sync.indexer import Indexer, ReconcileStats

log = get_logger(__name__)

MAX_PAGE = 500  # list_documents page size


def reranker_factory(settings: Settings, cli_model: str | None = None) -> Callable[[], Reranker | None] | None:
    """A lazy reranker: the CLI's model if named, else the configured one, else None.
    The model loads on first use (a search that asks for reranking)."""
    name = cli_model or settings.search.reranker
    if not name:
        return None
    reranker = CrossEncoderReranker(name, settings.embedding.device)
    return lambda: reranker


MODEL_FIT_SAMPLE = 2000  # chunks read to judge the notes' script mix

class Index:
    """One open index. Use `Index.open(...)` (an async context manager)."""

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None, reranker_model: str | None = None,
                 bulk: BulkLimiter | None = None):
        self.settings = settings
        self.kb: Path = settings.require_kb()            # resolved once, here
        self.path: Path = settings.resolved_index_path()
        self.embedder: Embedder = embedder or make_embedder(settings.embedding)
        self.queries = QueryBatcher(self.embedder)
        self.bulk = bulk
        self.searcher = Searcher(settings.search, embed_query=self.queries.embed,
                                 reranker=reranker_factory(settings, reranker_model))
        self.wconn: aiosqlite.Connection | None = None
        self.rconn: aiosqlite.Connection | None = None
        self.readers: ReaderPool | None = None
        self.indexer: Indexer | None = None
        self.embedding: EmbedQueue | None = None

    # -- opening and closing ----------------------------------------------------------
    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        *,
        readonly: bool = False,
        rebuild: bool = False,
        pool: bool = False,
        embedder: Embedder | None = None,
        reranker_model: str | None = None,
    ) -> AsyncIterator["Index"]:
        index = cls(settings, embedder=embedder, reranker_model=reranker_model)
        if readonly:
            await index.open_reader()
        else:
            await index.open_writer(rebuild=rebuild, pool=pool)
        try:
            yield index
        finally:
            await index.close()

    async def open_writer(self, *, rebuild: bool = False, pool: bool = False) -> None:
        """Create or check the index, open the write connection (and a reader pool for the daemon)."""
        if rebuild:
            db.remove_index_files(self.path)
            log.info("index_rebuild", index=str(self.path))
        reads.prepare_index(self.path, model=self.embedder.identity, dimension=self.embedder.dimension,
                            kb_path=str(self.kb))
        self.wconn = await db.connect(self.path)
        self.indexer = Indexer(self.wconn, self.kb, self.settings.index, self.embedder, self.settings.parsers)
        run = self.bulk.embed if self.bulk is not None else None
        self.embedding = EmbedQueue(self.wconn, self.embedder, self.settings.embedding.batch_size,
                                    **({"run": run} if run else {}))
        if pool:
            self.readers = ReaderPool(self.path)

    async def open_reader(self) -> None:
        """For the read commands: the index must exist and match the model; one read-only connection."""
        reads.check_existing_index(self.path, model=self.embedder.identity, dimension=self.embedder.dimension)
        self.rconn = await db.connect(self.path, readonly=True)

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            if self.readers is not None:
                await self.readers.close()
            if self.rconn is not None:
                await self.rconn.close()
                self.rconn = None
            if self.wconn is not None:
                # Take the write lock so the current transaction finishes first.
                async with writer.write_lock(self.wconn):
                    await self.wconn.close()
                self.wconn = None

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[aiosqlite.Connection]:
        """A connection to read with: from the pool (daemon), the read-only one, else the writer's."""
        if self.readers is not None:
            async with self.readers.connection() as conn:
                yield conn
        else:
            conn = self.rconn or self.wconn
            assert conn is not None, "the index is not open"
            yield conn

    # -- writing ------------------------------------------------------------------------
    async def reconcile(self, paths: Sequence[str] | set[str] | None = None,
                        progress: Progress | None = None) -> ReconcileStats:
        """Reconcile the whole folder (paths None) or only the given paths with the index."""
        assert self.indexer is not None, "open the index as a writer to reconcile"
        if paths is None:
            stats = await self.indexer.reconcile_all(progress=progress)
            await self.check_model_fit()
            return stats
        return await self.indexer.reconcile_paths(paths)

    async def check_model_fit(self) -> str | None:
        """After a full reconcile: does the model read what the notes are written in?

        The share of CJK letters over a deterministic sample of chunks, against the model's
        languages; stored in meta `model_fit` (shown by `groove status` and `index_status`),
        and logged once when it first stops fitting.
        """
        assert self.wconn is not None
        cur = await self.wconn.execute(f"SELECT content FROM chunks ORDER BY hash LIMIT {MODEL_FIT_SAMPLE}")
        share = cjk_share([r[0] for r in await cur.fetchall()])
        warning = model_fit_warning(self.embedder.identity, share)
        old = json.loads(await reads.get_meta(self.wconn, "model_fit") or "null")
        new = {"cjk_share": round(share, 3), "warning": warning}
        if old != new:
            await writer.set_meta(self.wconn, "model_fit", json.dumps(new, ensure_ascii=False))
            if warning and not (old or {}).get("warning"):
                log.warning("model_does_not_fit_notes", message=warning)
        return warning

    async def collect_garbage(self) -> int:
        assert self.wconn is not None
        return await writer.collect_garbage(self.wconn)

    async def embed_batch(self) -> tuple[int, int]:
        """One batch of the queue (the daemon's workers): (texts fetched, texts embedded)."""
        assert self.embedding is not None, "open the index as a writer to embed"
        return await self.embedding.embed_batch()

    async def embed_pending(self, progress: Progress | None = None) -> int:
        """Every pending text, batch by batch (`groove index`)."""
        assert self.embedding is not None, "open the index as a writer to embed"
        return await self.embedding.embed_pending(progress=progress)

    # -- reading ------------------------------------------------------------------------
    async def search(self, req: SearchRequest, *, searcher: Searcher | None = None) -> dict[str, Any]:
        async with self.reading() as conn:
            return await (searcher or self.searcher).search(conn, req)

    async def related(self, path: str, **kw: Any) -> dict[str, Any]:
        async with self.reading() as conn:
            return await related_notes(conn, path, **kw)

    async def status(self) -> dict[str, Any]:
        async with self.reading() as conn:
            return await reads.status(conn, index_path=self.path)

    async def pending(self) -> int:
        async with self.reading() as conn:
            return await reads.pending_count(conn)

    async def get_document(self, path: str) -> dict[str, Any]:
        if not isinstance(path, str) or not path.strip():
            raise NotFoundError("path is empty; pass a path exactly as a search result returned it")
        async with self.reading() as conn:
            doc = await reads.get_document(conn, path)
        if doc is None:
            raise NotFoundError(
                f"no indexed note at {path!r}; paths are relative to the notes folder, as search and "
                "list_documents return them"
            )
        return doc

    async def list_documents(self, *, cursor: str | None = None, limit: int = 50, folder: str | None = None,
                             tags: list[str] | None = None) -> dict[str, Any]:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise QueryError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        after = ""
        if cursor:
            try:
                after = bytes.fromhex(cursor).decode("utf-8")
            except ValueError as exc:
                raise QueryError("invalid cursor; pass next_cursor from the previous page unchanged") from exc
        async with self.reading() as conn:
            docs, more = await reads.list_documents(conn, after=after, limit=limit, folder=folder, tags=tags)
        return {"documents": docs, "next_cursor": docs[-1]["path"].encode().hex() if more and docs else None}

    def note_path(self, given: str) -> str:
        """A note as the user named it (relative path, or a file path inside the notes folder) -> relative path."""
        candidate = Path(given)
        if candidate.is_absolute() or candidate.exists():
            try:
                return candidate.resolve().relative_to(self.kb).as_posix()
            except ValueError:
                raise UsageError(f"{given} is not inside the notes folder {self.kb}") from None
        return given

    async def evaluate(self, queries: Sequence[JudgedQuery], *, retriever: str, limit: int,
                       request_options: dict[str, Any]) -> dict[str, Any]:
        """Judged queries through the search pipeline; query vectors computed in batches up front."""
        cache: dict[str, np.ndarray] = {}
        if retriever != "fts":
            texts = []
            for q in queries:
                try:
                    texts.append(compile_query(q.query).vector_text)
                except QueryError:
                    continue
            texts = list(dict.fromkeys(t for t in texts if t.strip()))
            vectors = await anyio.to_thread.run_sync(self.embedder.embed_queries, texts)
            cache = dict(zip(texts, vectors))

        async def embed_query(text: str) -> np.ndarray:
            return cache[text] if text in cache else await self.queries.embed(text)

        searcher = Searcher(self.settings.search, embed_query=embed_query, reranker=self.searcher.reranker)
        async with self.reading() as conn:
            return await run_eval(searcher, conn, queries, retriever=retriever, limit=limit,
                                  request_options=request_options)


# --- the commands, one call each (the CLI's and the tests' entry points) -------------------------

async def index_once(settings: Settings, *, rebuild: bool = False, progress: Progress | None = None,
                     embedder: Embedder | None = None) -> dict[str, Any]:
    """`groove index`: one full reconcile, then embed everything pending."""
    started = time.perf_counter()
    async with Index.open(settings, rebuild=rebuild, embedder=embedder) as index:
        stats = await index.reconcile(progress=progress)
        stats.chunks_embedded = await index.embed_pending(progress=progress)
        await index.collect_garbage()
        stats.seconds = time.perf_counter() - started
        summary = stats.to_dict()
        async with index.reading() as conn:
            summary["pending_chunks"] = await reads.pending_count(conn)
            summary["embeddings_computed"] = int(await reads.get_meta(conn, "embeddings_computed") or 0)
        summary["kb_path"] = str(index.kb)
        summary["index_path"] = str(index.path)
    log.info("index_done", **{k: v for k, v in summary.items() if k not in ("kb_path", "index_path")})
    return summary


async def read_status(settings: Settings, *, embedder: Embedder | None = None) -> dict[str, Any]:
    async with Index.open(settings, readonly=True, embedder=embedder) as index:
        return await index.status()


async def search_once(settings: Settings, req: SearchRequest, *, reranker_model: str | None = None,
                      embedder: Embedder | None = None) -> dict[str, Any]:
    """`groove search`: one query against the index, read-only."""
    if reranker_model and req.rerank is None:
        req = req.model_copy(update={"rerank": True})  # a model named on the command line applies unconditionally
    async with Index.open(settings, readonly=True, embedder=embedder, reranker_model=reranker_model) as index:
        return await index.search(req)


async def related_once(settings: Settings, path: str, *, embedder: Embedder | None = None, **kw: Any) -> dict[str, Any]:
    """`groove related PATH`: notes nearest in meaning, read-only."""
    async with Index.open(settings, readonly=True, embedder=embedder) as index:
        return await index.related(index.note_path(path), **kw)


async def eval_once(
    settings: Settings,
    source: Path,
    *,
    retriever: str = "hybrid",
    split: str | None = None,
    limit: int = 10,
    max_queries: int | None = None,
    request_options: dict[str, Any] | None = None,
    reranker_model: str | None = None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """`groove eval`: judged queries through the search pipeline."""
    queries = load_golden(source, split)
    if max_queries is not None:
        queries = queries[:max_queries]
    options = dict(request_options or {})
    if reranker_model and options.get("rerank") is None:
        options["rerank"] = True
    async with Index.open(settings, readonly=True, embedder=embedder, reranker_model=reranker_model) as index:
        result = await index.evaluate(queries, retriever=retriever, limit=limit, request_options=options)
        result["index_path"] = str(index.path)
    result["source"] = str(source)
    return result


__all__ = ["Index", "eval_once", "index_once", "read_status", "related_once", "reranker_factory", "search_once"]
